"""Ignores ties: cheapest_accurate_preset takes min by cost alone, so a cost tie goes to dict order.
Fine whenever costs differ; the visible and hidden tests include a tie: "on a tie in cost, the smaller
error wins" / "break the tie by the smaller error".
"""

EXPECTED = {'lost': ['test_cheapest_accurate_preset_visible', 'test_cheapest_accurate_preset_hidden'],
 'feedback': ['on a tie in cost, the smaller error wins', 'break the tie by the smaller error']}


def cheapest_accurate_preset(errors: dict[str, float], costs: dict[str, float], tol: float) -> str | None:
    """The cheapest preset whose error is <= tol; ties by smaller error, then by name; None if none."""
    qualifying = [name for name in errors if errors[name] <= tol]
    if not qualifying:
        return None
    # min keeps the first of equal costs, in whatever order the dict happens to have
    return min(qualifying, key=lambda name: costs[name])
