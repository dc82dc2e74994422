"""Names compared without case: cheapest_accurate_preset breaks a tie in cost and error by the lowercase
name, so 'b' comes before 'M'. The contract says Python's order of strings, in which uppercase comes
first: "a tie in cost and error between Z, M and b", "break the tie by the smaller error, then by name".
"""

EXPECTED = {'lost': ['test_cheapest_accurate_preset_visible', 'test_cheapest_accurate_preset_hidden'],
 'feedback': ['a tie in cost and error between Z, M and b', 'break the tie by the smaller error, then by name']}


def cheapest_accurate_preset(errors: dict[str, float], costs: dict[str, float], tol: float) -> str | None:
    """The cheapest preset whose error is <= tol; ties by smaller error, then by name; None if none."""
    qualifying = [name for name in errors if errors[name] <= tol]
    if not qualifying:
        return None
    return min(qualifying, key=lambda name: (costs[name], errors[name], name.lower()))
