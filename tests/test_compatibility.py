"""`ffm.compatibility.group_pairs` (vectorised) equals a plain per-group reference on random
keys: the same pairs in the same order, the same new keys and per-pair columns."""
import pickle
from itertools import product

import numpy as np
import pandas as pd
import pytest

import arch as arch_specs
import workloads
from ffm.compatibility import Key, _renamings, _same_rank, factorize_keys, group_pairs, needed_depth, pmapping_groups
from pmapgen.capacity import finite_levels

W = workloads.load("gpt3", batch=1, seq_len=16)
A = arch_specs.load("tpuv4i")
LEVELS = finite_levels(A)
TOP = A.memories[0].name


def renamings(key: Key, ey) -> list[tuple]:
    """The frontier with each loop over r (of key.einsum) renamed to every rank variable of
    ey that may be the same loop, in `itertools.product` order."""
    return list(product(*[[(b, tile, sp) for b in ey.rank_variables
                           if b == r or _same_rank(r, b, W.einsum(key.einsum), ey)] for r, tile, sp in key.frontier]))


def reference(pkeys, present, ycompat, einsum, later, workload, arch, levels):
    """Pair by pair, as the rules read: the shared tensors' c_T agree and the pmapping's
    first s loops are the partial's frontier under one of its renamings."""
    ey = workload.einsum(einsum)
    alive = {t for t in workload.tensors if any(u in later for u in workload.users(t))}
    tensors = tuple(sorted({t for ykey, _ in ycompat for t, _ in ykey}))
    rows, new_keys = [], {}
    for pg in present.tolist():
        key = pkeys[pg]
        live = dict(key.live)
        s = needed_depth(live, TOP)
        for frontier in renamings(key, ey):
            for yg, (ykey, yfused) in enumerate(ycompat):
                ykey = dict(ykey)
                if yfused[:s] != frontier or any(live[t] != c for t, c in ykey.items() if t in live):
                    continue
                new_live = {t: c for t, c in {**live, **ykey}.items() if t in alive}
                s_next = needed_depth(new_live, TOP)
                nk = Key(tuple(sorted(new_live.items())), yfused[:s_next], einsum if s_next else "")
                onchip = {t: levels.index(c[0]) for t, c in ykey.items() if c[0] != TOP}
                rows.append((pg, yg, s, len(yfused), s_next, new_keys.setdefault(nk, len(new_keys)),
                             [onchip.get(t, -1) if t not in live else -1 for t in tensors],
                             [onchip.get(t, -1) if t in live and t not in alive else -1 for t in tensors]))
    return rows, list(new_keys), tensors


def random_problem(rng, einsum):
    """Partial keys and pmapping groups drawn from small pools, so that many match."""
    order = W.einsum_names
    earlier, later = order[:order.index(einsum)], set(order[order.index(einsum) + 1:])
    held = sorted({t for e in earlier for t in W.einsum(e).tensors if W.is_shared(t)})
    ey = W.einsum(einsum)

    def loops(ranks, n):
        return tuple((str(rng.choice(ranks)), int(rng.choice([2, 4])), rng.choice([None, "core"])) for _ in range(n))

    def c_t():
        level = str(rng.choice([TOP, *LEVELS]))
        return level, tuple((int(rng.integers(2)), int(rng.choice([2, 4])), None) for _ in range(rng.integers(3)))

    pkeys = []
    for _ in range(80):
        live = {t: c_t() for t in held if rng.random() < 0.6}
        s = needed_depth(live, TOP)
        ex = str(rng.choice(earlier))
        pkeys.append(Key(tuple(sorted(live.items())), loops(W.einsum(ex).rank_variables[:2], s), ex if s else ""))
    shared = sorted(t for t in ey.tensors if W.is_shared(t))
    ycompat = list(dict.fromkeys((tuple((t, c_t()) for t in shared), loops(ey.rank_variables[:3], int(rng.integers(4))))
                                 for _ in range(120)))
    present = np.unique(rng.integers(len(pkeys), size=60))
    return pkeys, present, ycompat, einsum, later, W, A, LEVELS


@pytest.mark.parametrize("einsum", ["V", "QK", "QK_softmax", "AV", "FFB"])
@pytest.mark.parametrize("seed", range(8))
def test_group_pairs_equals_reference(einsum, seed):
    args = random_problem(np.random.default_rng(seed), einsum)
    pairs = group_pairs(*args)
    rows, keys, tensors = reference(*args)
    assert pairs.tensors == tensors and pairs.keys == keys
    width = len(tensors)
    for name, i in (("p", 0), ("y", 1), ("s", 2), ("fy", 3), ("s_next", 4), ("key", 5)):
        assert getattr(pairs, name).tolist() == [r[i] for r in rows], name
    assert np.array_equal(pairs.fresh, np.array([r[6] for r in rows], dtype=np.int64).reshape(-1, width))
    assert np.array_equal(pairs.dying, np.array([r[7] for r in rows], dtype=np.int64).reshape(-1, width))


@pytest.mark.parametrize("einsum", ["QK", "AV"])
def test_pmapping_groups_coded_once_answer_every_partial_set(einsum):
    """One `PmappingGroups` (coded once per table, as the join holds it) joined with
    several partial sets in turn gives what coding the groups afresh each time gives: a
    partial set's c_T and loops the groups lack must not stay behind in it."""
    rng = np.random.default_rng(1)
    pkeys, present, ycompat, *rest = random_problem(rng, einsum)
    held = pmapping_groups(ycompat)
    for _ in range(4):
        pkeys, present, _, *rest = random_problem(rng, einsum)
        a, b = group_pairs(pkeys, present, held, *rest), group_pairs(pkeys, present, ycompat, *rest)
        assert a.keys == b.keys and len(a.p) > 0
        for name in ("p", "y", "s", "fy", "s_next", "key", "fresh", "dying"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), name


def test_random_problems_match_often():
    """The pools are small enough that the comparison above is about many real pairs,
    frontiers with several renamings included (QK's p may be K's m)."""
    n_pairs, n_renamed = 0, 0
    for seed in range(8):
        pkeys, *rest = args = random_problem(np.random.default_rng(seed), "QK")
        pairs = group_pairs(*args)
        n_pairs += len(pairs.p)
        n_renamed += sum(len(renamings(pkeys[p], W.einsum("QK"))) > 1 for p in pairs.p.tolist())
    assert n_pairs > 100 and n_renamed > 10


def test_renamings_in_product_order():
    """Several loops with several candidates each (rare in the random keys above): every
    choice, in `itertools.product` order; a loop without candidates leaves none."""
    rng = np.random.default_rng(0)
    lengths = rng.integers(0, 4, size=40)
    counts = rng.integers(0, 4, size=int(lengths.sum()))
    start = np.cumsum(counts) - counts
    codes = rng.permutation(int(counts.sum()))
    per, rows = _renamings(lengths, start, counts, codes)
    expected, ends = [], np.cumsum(lengths)
    for end, n in zip(ends.tolist(), lengths.tolist()):
        expected.append(list(product(*[codes[start[i]:start[i] + counts[i]].tolist() for i in range(end - n, end)])))
    assert per.tolist() == [len(e) for e in expected]
    width = int(lengths.max())
    assert rows.tolist() == [list(c) + [-1] * (width - len(c)) for e in expected for c in e]


@pytest.mark.parametrize("seed", range(4))
def test_factorize_keys_equals_pandas(seed):
    """Keys shared as objects, equal but distinct objects, and unique ones: the codes and
    distinct keys `pd.factorize` gives, in its order."""
    rng = np.random.default_rng(seed)
    pool = [((("A", ("L", ((0, int(a), False),))),), ((("m", int(b), False)),)) for a, b in rng.integers(0, 3, (6, 2))]
    values = [pool[i] if rng.random() < 0.5 else pickle.loads(pickle.dumps(pool[i]))  # the object, or an equal one
              for i in rng.integers(0, len(pool), 40)]
    codes, uniques = factorize_keys(values)
    expected_codes, expected = pd.factorize(pd.Series(values, dtype=object))
    assert codes.tolist() == expected_codes.tolist()
    assert list(uniques) == list(expected)
    assert factorize_keys([])[0].tolist() == []


@pytest.mark.parametrize("seed", range(3))
def test_row_codes_number_distinct_rows_by_first_appearance(seed):
    """`_row_codes`: equal rows get equal codes, numbered by first appearance, also where
    the columns' mixed radix must be hashed on the way (entries up to 10^6, 30 columns)."""
    from ffm.compatibility import _row_codes
    rng = np.random.default_rng(seed)
    for n, k, high in [(0, 3, 5), (50, 0, 5), (200, 4, 3), (200, 30, 10 ** 6), (300, 12, 2)]:
        m = rng.integers(-1, high, (n, k))
        m[n // 2:] = m[:n - n // 2]  # repeated rows
        first: dict = {}
        expected = [first.setdefault(tuple(r), len(first)) for r in m.tolist()]
        assert _row_codes(m).tolist() == expected
