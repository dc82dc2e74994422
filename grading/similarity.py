"""Which learners handed in the same answer: token fingerprints of each answer, compared in pairs.

Each answer (an answer cell's source; see :meth:`grading.assignment.Assignment.answers`) is cut into Python
tokens with the standard library's :mod:`tokenize`, then normalised so that what a copier changes
cheaply does not count:

* comments, docstrings, blank lines and formatting (spacing, line breaks inside brackets, quote style)
  are dropped or made uniform;
* every name the answer binds itself (parameters, variables, inner functions, loop and comprehension
  targets) becomes ``V``, so renaming variables changes nothing; names it only reads (``jnp``, ``P``,
  ``jax.lax.psum``), attributes, keywords, numbers and strings are kept, so ``jnp.sum`` and
  ``jnp.mean`` still differ.

The normalised tokens are cut into overlapping runs of :data:`K` tokens (k-grams, as in MOSS:
Schleimer, Wilkerson and Aiken, *Winnowing*, SIGMOD 2003). Every k-gram that occurs in the reference
solution or the released stub of that exercise is removed first (both are sources everyone may
share), and so is any k-gram that more than :func:`common_limit` learners share (idioms a class
writes independently). Two learners' answers to one exercise are then as similar as the Jaccard
index of what is left; a pair at or above :data:`THRESHOLD` sharing at least :data:`MIN_SHARED`
k-grams is flagged.

What it cannot see, said in the report too: answers copied and then restructured (statements
reordered or rewritten, a loop turned into a comprehension), copies of a source outside the class
(another year, the web, a chatbot), and two learners who both copied the reference solution (its
k-grams are removed). A flag is a reason to read two answers side by side, never proof.

Written on the standard library rather than a plagiarism package: copydetect (0.5, maintained)
tokenises with Pygments and replaces *every* name by one token, so ``jnp.sum`` and ``jnp.mean`` read
the same and short JAX answers collide; pycode_similar compares whole-function ASTs and has not been
released since 2020. Python's own tokenizer and ``ast`` give the exact distinction wanted here.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import io
import keyword
import tokenize
from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations

#: Tokens per k-gram.
K = 8
#: Jaccard index of two answers' remaining k-grams at or above which a pair is flagged.
THRESHOLD = 0.5
#: Fewest k-grams a flagged pair shares beyond the reference and the stub (short answers look alike).
MIN_SHARED = 10

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER}
_STATEMENT_START = {tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}


def bound_names(source: str) -> set[str]:
    """The names an answer binds itself: parameters, assigned variables, inner defs, loop targets.

    >>> sorted(bound_names("def f(x):\\n    y = jnp.sum(x)\\n    return [v for v in y]"))
    ['f', 'v', 'x', 'y']
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names - set(dir(builtins))


def normalised_tokens(source: str) -> list[str]:
    """The answer's tokens without comments, docstrings or formatting, its own names as ``V``.

    >>> " ".join(normalised_tokens("def f(a):\\n    '''Doc.'''\\n    return a + 1  # one more"))
    'def V ( V ) : <newline> <indent> return V + 1 <newline> <dedent>'
    """
    own = bound_names(source)
    try:
        raw = [t for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type not in _SKIP]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        raw = []
    out: list[str] = []
    skip: set[int] = set()
    previous = tokenize.NEWLINE
    for i, tok in enumerate(raw):
        after = raw[i + 1].type if i + 1 < len(raw) else tokenize.NEWLINE
        if i in skip:
            continue
        if tok.type == tokenize.STRING and previous in _STATEMENT_START and after == tokenize.NEWLINE:
            skip.add(i + 1)  # a docstring (or a bare string statement) and the NEWLINE ending it
            continue
        previous = tok.type
        if tok.type == tokenize.NAME:
            after_dot = bool(out) and out[-1] == "."
            out.append(
                "V"
                if tok.string in own and not after_dot and not keyword.iskeyword(tok.string)
                else tok.string
            )
        elif tok.type == tokenize.STRING:
            try:
                out.append(repr(ast.literal_eval(tok.string)))
            except (ValueError, SyntaxError):
                out.append(tok.string)
        elif tok.type == tokenize.FSTRING_START:  # quote style is formatting
            out.append("f" + tok.string.lower().replace("'", '"').strip("frb"))
        elif tok.type == tokenize.FSTRING_END:
            out.append(tok.string.replace("'", '"'))
        elif tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            out.append(f"<{tokenize.tok_name[tok.type].lower()}>")
        else:
            out.append(tok.string)
    return out


def kgrams(source: str) -> set[tuple[str, ...]]:
    """The answer's normalised k-grams (an answer shorter than :data:`K` tokens is one k-gram)."""
    tokens = normalised_tokens(source)
    if not tokens:
        return set()
    if len(tokens) < K:
        return {tuple(tokens)}
    return {tuple(tokens[i : i + K]) for i in range(len(tokens) - K + 1)}


def common_limit(learners: int) -> int:
    """More learners than this sharing a k-gram make it an idiom of the class, not a copy."""
    return max(3, learners // 5)


@dataclass(frozen=True)
class Pair:
    """Two learners whose answers to one exercise look alike."""

    a: str
    b: str
    exercise: str
    score: float  # Jaccard index of their k-grams beyond the reference and the stub
    shared: int  # k-grams both have beyond the reference and the stub


def similar_pairs(
    answers: dict[str, dict[str, str]],
    excluded: dict[str, list[str]],
    threshold: float = THRESHOLD,
    min_shared: int = MIN_SHARED,
) -> list[Pair]:
    """Every pair of learners whose answers to one exercise are at least ``threshold`` alike.

    Args:
      answers: learner -> exercise (answer grade_id) -> the answer's source.
      excluded: exercise -> sources whose k-grams are no one's (the reference solution, the stub).
      threshold: the least Jaccard index flagged.
      min_shared: the fewest shared k-grams flagged.

    Returns:
      The flagged pairs, most alike first (learner ids in each pair sorted).
    """
    exercises = sorted({e for per in answers.values() for e in per})
    limit = common_limit(len(answers))
    pairs: list[Pair] = []
    for exercise in exercises:
        base = set().union(*(kgrams(s) for s in excluded.get(exercise, [])))
        grams = {learner: kgrams(per[exercise]) - base for learner, per in answers.items() if exercise in per}
        holders: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for learner, own in grams.items():
            for gram in own:
                holders[gram].append(learner)
        shared: dict[tuple[str, str], int] = defaultdict(int)
        for gram, who in holders.items():
            if len(who) > limit:
                for learner in who:
                    grams[learner].discard(gram)
                continue
            for a, b in combinations(sorted(who), 2):
                shared[a, b] += 1
        for (a, b), n in shared.items():
            union = len(grams[a] | grams[b])
            score = n / union if union else 0.0
            if n >= min_shared and score >= threshold:
                pairs.append(Pair(a, b, exercise, round(score, 3), n))
    return sorted(pairs, key=lambda p: (-p.score, p.a, p.b, p.exercise))


def side_by_side(pair: Pair, answers: dict[str, dict[str, str]], differ: difflib.HtmlDiff) -> str:
    """An HTML table showing the pair's two answers side by side, changed lines marked."""
    return differ.make_table(
        answers[pair.a][pair.exercise].splitlines(),
        answers[pair.b][pair.exercise].splitlines(),
        fromdesc=pair.a,
        todesc=pair.b,
    )
