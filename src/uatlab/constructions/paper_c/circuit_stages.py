"""The feed-forward stages of the next-token memorizer, as integer ReLU circuits.

Each function appends layers to a `uatlab.constructions.paper_c.relu_circuit.Circuit` and
returns the registers it produces as `Lin` expressions over the last layer. Every stage is exact
on integer inputs in its stated range; the invariant proved beside each is what the certificate relies
on (it re-checks the values on the data anyway).

Comparison gadget (used everywhere): for an integer x and integer threshold T,

    1[x ≥ T] = ReLU(1 − ReLU(T − x))                                         (G1)

(two layers: the inner unit is 0 iff x ≥ T, else ≥ 1). The one-layer form ReLU(x−T+1) − ReLU(x−T) is
also exact, but its two terms are as large as x, and T times them is ~x² in the next layer: too many
bits for float64. With (G1) every term |w·u| that any unit sums stays below max(x, T)·2, which is what
the float64 certificate needs (every partial sum an integer below 2^53).
Equality gadget: for integers x, c,  |x − c| = ReLU(x − c) + ReLU(c − x), and
ReLU(v − K·|x − c|) = v·1[x = c] whenever 0 ≤ v < K.                               (G2)
"""

from __future__ import annotations

from uatlab.constructions.paper_c.relu_circuit import Circuit, Lin


def _layer(circuit: Circuit, regs: dict[str, Lin], extra: list[Lin]) -> tuple[dict[str, Lin], list[Lin]]:
    """Materialise every register (each ≥ 0, so ReLU(x) = x) and the extra units in one new layer."""
    names = list(regs)
    units = circuit.add_layer([regs[k] for k in names] + extra)
    return dict(zip(names, units[: len(names)], strict=True)), units[len(names) :]


def _live(regs: dict[str, Lin]) -> dict[str, Lin]:
    return {k: v for k, v in regs.items() if v.terms or v.const}


def _compare(
    circuit: Circuit, regs: dict[str, Lin], tests: dict[str, tuple[Lin, int]], extra2: list[Lin] | None = None
) -> tuple[dict[str, Lin], dict[str, Lin], list[Lin]]:
    """Two layers computing bit_j = 1[x_j ≥ T_j] (G1) for each test j; registers are carried.

    ``extra2`` are further units (over the *first* layer's registers) put in the second layer.
    Returns (registers, bits, extra2 units), all as Lins over the second layer.
    """
    names = list(tests)
    regs, A = _layer(circuit, _live(regs), [T - x for x, T in tests.values()])
    units2 = [1 - a for a in A] + [e for e in (extra2 or [])]
    regs, B = _layer(circuit, regs, units2)
    bits = dict(zip(names, B[: len(names)], strict=True))
    return regs, bits, B[len(names) :]


def mixed_radix_digits(
    circuit: Circuit, regs: dict[str, Lin], src: str, radices: list[int], h_max: int, prefix: str
) -> dict[str, Lin]:
    """Digits d_0..d_{k-1} of (h mod Π radices) in mixed radix (low first), h = regs[src] ∈ [0, h_max).

    Greedy binary long division from the top (Vardi et al. 2022's bit extraction, here on a known
    integer): with P_i = Π_{k<i} radix_k, first strip multiples 2^b·P_k for b high to low (this leaves
    h mod P_k), then for each digit i from the top, for b from ⌈log2 radix_i⌉−1 down to 0:
    bit = 1[r ≥ 2^b P_i] (G1), r ← r − bit·2^b P_i, d_i ← d_i + bit·2^b. Invariant: before digit i,
    0 ≤ r < radix_i·P_i, so the bits spell ⌊r / P_i⌋ < radix_i exactly; d_0 is the final r.
    Two layers per bit; registers d_i are written as ``{prefix}{i}``. Radix-1 digits are 0.
    """
    P = [1]
    for rdx in radices:
        P.append(P[-1] * rdx)
    regs = dict(regs)
    regs["__r"] = regs.pop(src)
    steps: list[tuple[int, int | None, int]] = []
    top = P[-1]
    if top < h_max:
        b = 0
        while (top << (b + 1)) < h_max:
            b += 1
        steps += [(top << k, None, 0) for k in range(b, -1, -1)]
    for i in range(len(radices) - 1, 0, -1):
        nb = (radices[i] - 1).bit_length()
        steps += [(P[i] << k, i, k) for k in range(nb - 1, -1, -1)]
    for i in range(1, len(radices)):
        regs[f"{prefix}{i}"] = Lin()
    for T, i, k in steps:
        regs, bits, _ = _compare(circuit, regs, {"c": (regs["__r"], T)})
        regs["__r"] = regs["__r"] - bits["c"] * T
        if i is not None:
            regs[f"{prefix}{i}"] = regs.get(f"{prefix}{i}", Lin()) + bits["c"] * (1 << k)
    out = {k: v for k, v in regs.items() if k != "__r"}
    out[f"{prefix}0"] = regs["__r"]
    return out


def residues(
    circuit: Circuit, regs: dict[str, Lin], src: str, moduli: list[int], src_max: int, prefix: str
) -> dict[str, Lin]:
    """``{prefix}{t}`` = regs[src] mod moduli[t] for every t, computed in lockstep; src ∈ [0, src_max).

    For each modulus M: r ← src, then for k from the largest with M·2^k < src_max down to 0:
    r ← r − M·2^k·1[r ≥ M·2^k] (G1). Invariant: r < M·2^(k+1) before step k, so r < M at the end.
    """
    regs = dict(regs)
    q = regs.pop(src)
    progs = []
    for M in moduli:
        k = 0
        while (M << (k + 1)) < src_max:
            k += 1
        progs.append([M << j for j in range(k, -1, -1)] if M < src_max else [])
    for t in range(len(moduli)):
        regs[f"{prefix}{t}"] = q
    for step in range(max((len(p) for p in progs), default=0)):
        tests = {f"{prefix}{t}": (regs[f"{prefix}{t}"], p[step]) for t, p in enumerate(progs) if step < len(p)}
        regs, bits, _ = _compare(circuit, regs, tests)
        for name, c in bits.items():
            regs[name] = regs[name] - c * tests[name][1]
    return regs


def select_words(
    circuit: Circuit,
    regs: dict[str, Lin],
    bank_regs: list[str],
    word_regs: list[str],
    words: list[list[list[int]]],
    word_bound: int,
    keep: list[str],
) -> dict[str, Lin]:
    """For each table t, S_t = words[t][b_t][r_t]: b_t = regs[bank_regs[t]], r_t = regs[word_regs[t]].

    Layer A: a±_c = ReLU(±(b_t − c)) for each bank c of each table, e±_j = ReLU(±(r_t − j)) for each word j.
    Layer B: I_{t,c} = ReLU(1 − a+_c − a−_c) = 1[b_t = c], δ_{t,j} = 1[r_t = j]          (G2 with v = 1)
    Layer C: g_{t,j} = ReLU(Σ_c W_t[c][j]·I_{t,c} + K·δ_{t,j} − K) with K = word_bound > every word, so
             g_{t,j} = W_t[b_t][j] if j = r_t and 0 otherwise; S_t = Σ_j g_{t,j} = W_t[b_t][r_t].
             (With one word per bank: S_t = ReLU(Σ_c W_t[c]·I_{t,c}).)
    The words are weights of layer C: one weight per stored word. Registers in ``keep`` are carried.
    """
    m = len(words[0][0])
    a_units: list[Lin] = []
    ia, ie = [], []
    for t, bname in enumerate(bank_regs):
        b = regs[bname]
        ia.append(len(a_units))
        for c in range(len(words[t])):
            a_units += [b - c, c - b]
        ie.append(len(a_units))
        if m > 1:
            r = regs[word_regs[t]]
            for j in range(m):
                a_units += [r - j, j - r]
    carried, A = _layer(circuit, {k: regs[k] for k in keep}, a_units)
    b_units: list[Lin] = []
    ib, idl = [], []
    for t in range(len(bank_regs)):
        ib.append(len(b_units))
        for c in range(len(words[t])):
            b_units.append(1 - A[ia[t] + 2 * c] - A[ia[t] + 2 * c + 1])
        idl.append(len(b_units))
        if m > 1:
            for j in range(m):
                b_units.append(1 - A[ie[t] + 2 * j] - A[ie[t] + 2 * j + 1])
    carried, B = _layer(circuit, carried, b_units)
    c_units: list[Lin] = []
    for t in range(len(bank_regs)):
        for j in range(m):
            u = Lin({_unit(B[ib[t] + c]): words[t][c][j] for c in range(len(words[t])) if words[t][c][j] != 0})
            if m > 1:
                u = u + B[idl[t] + j] * word_bound - word_bound
            c_units.append(u)
    carried, Cu = _layer(circuit, carried, c_units)
    circuit.notes["words"] = len(circuit.layers) - 1
    out = dict(carried)
    for t in range(len(bank_regs)):
        s = Lin()
        for j in range(m):
            s = s + Cu[t * m + j]
        out[f"S{t}"] = s
    return out


def extract_digit(
    circuit: Circuit, regs: dict[str, Lin], words: list[str], offsets: list[str], outs: list[str], C: int, D: int
) -> dict[str, Lin]:
    """outs[t] = digit o_t of regs[words[t]] in base C, o_t = regs[offsets[t]], all tables in lockstep.

    x < C^D, 0 ≤ o < D. For digits i = D−1 … 0 and bits k = ⌈log2 C⌉−1 … 0: bit = 1[x ≥ 2^k C^i] (G1),
    x ← x − bit·2^k C^i, v ← v + bit·2^k; v is digit i (< C, by the invariant x < C^{i+1}). With the
    last bit of digit i the units a± = ReLU(±(o_t − i)) are formed; the next layer adds
    ReLU(v − C·(a+ + a−)) = v·1[o_t = i] to y_t (G2). Two layers per bit plus one final layer.
    Registers other than the words and offsets are dropped.
    """
    nb = bits_for(C)
    n_t = len(words)
    st: dict[str, Lin] = {}
    for t in range(n_t):
        st[f"x{t}"], st[f"o{t}"] = regs[words[t]], regs[offsets[t]]
    for i in range(D - 1, -1, -1):
        for k in range(nb - 1, -1, -1):
            T = (1 << k) * C**i
            if k == 0:  # a± = ReLU(±(o_t − i)): registers materialised by the compare's first layer
                for t in range(n_t):
                    st[f"ap{t}"], st[f"am{t}"] = st[f"o{t}"] - i, i - st[f"o{t}"]
                    if i == 0:
                        del st[f"o{t}"]
            st, bits, _ = _compare(circuit, st, {f"c{t}": (st[f"x{t}"], T) for t in range(n_t)})
            for t in range(n_t):
                if f"g{t}" in st:  # the previous digit's gated value is now a unit
                    st[f"y{t}"] = st.get(f"y{t}", Lin()) + st.pop(f"g{t}")
                c = bits[f"c{t}"]
                st[f"x{t}"] = st[f"x{t}"] - c * T
                st[f"v{t}"] = st.get(f"v{t}", Lin()) + c * (1 << k)
                if k == 0:
                    st[f"g{t}"] = st.pop(f"v{t}") - (st.pop(f"ap{t}") + st.pop(f"am{t}")) * C
                    if i == 0:
                        del st[f"x{t}"]
    st, _ = _layer(circuit, _live(st), [])
    return {outs[t]: st.get(f"y{t}", Lin()) + st[f"g{t}"] for t in range(n_t)}


def sum_mod(circuit: Circuit, regs: dict[str, Lin], names: list[str], C: int, out: str) -> dict[str, Lin]:
    """out = (Σ regs[names]) mod C for three values in [0, C): s − C·1[s ≥ C] − C·1[s ≥ 2C] (G1)."""
    s = Lin()
    for nm in names:
        s = s + regs[nm]
    rest = {k: v for k, v in regs.items() if k not in names} | {"__s": s}
    rest, bits, _ = _compare(circuit, rest, {"a": (s, C), "b": (s, 2 * C)})
    res = dict(rest)
    res[out] = res.pop("__s") - (bits["a"] + bits["b"]) * C
    return res


def _unit(u: Lin) -> int:
    """The index of a Lin that is a single unit of the current layer."""
    (k,) = u.terms
    return k


def bits_for(C: int) -> int:
    return max(1, (C - 1).bit_length())
