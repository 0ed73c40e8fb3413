"""Benchmark of ``uatlab compile``: each stage's CPU time against a lower bound measured in the same run.

    python benchmarks/compile.py                 # CoNLL-2003 train float64/float32, synthetic N=20,000,
                                                 # scaling (nested subsets, copies x1..x8), medians of 3
    python benchmarks/compile.py --cases ray     # CoNLL train x16 on a local 2-worker Ray vs the local executor
    python benchmarks/compile.py --quick         # CI size: first 1,000 CoNLL sentences, a small synthetic set
                                                 # (stage bounds for the synthetic set only)

Every case runs in fresh subprocesses through the real CLI (``uatlab compile ... --json``). Stage times are
CPU seconds of the compiling process (its ``time.perf_counter`` is replaced by ``time.process_time``, so
the CLI's own ``stage_seconds`` become CPU seconds); the whole run's CPU (user + system, children
included) and wall time come from the operating system. ``startup`` is the process CPU not inside any
stage (interpreter, imports).

Lower bounds, measured in a separate process of the same run on the same data (so a loaded machine slows
both alike). The per-element rates of np.exp and of an elementwise pass and the BLAS rates are the median of
``RATE_TIMINGS`` timings of a kernel of a few milliseconds (its steady speed in this run: the first timings also
fault in the output's pages, and a descheduling lands in one timing, not in the median):

* startup: ``import torch`` in a fresh interpreter (the model is a torch module); every process starts from cached
  bytecode (`warm_bytecode`);
* read + encode: a plain-Python parse of the file, a dict lookup per token, one BLAKE2b per vocabulary word;
* attention: K·Σn² score elements (K query-scale candidates) × (one exp + 5 elementwise passes), at the
  per-element rates of ``np.exp`` and of an elementwise pass measured in the same process;
* group contexts: K × (sort by (word, h) + unique) of T random (word, h) pairs, the sort being the one the
  compiler uses (``group_value_order``, equal to ``np.lexsort``);
* feed-forward construction: writing the model's parameters once (memory fill);
* certify: the certificate's essential matrix passes: 4 passes over every (token, candidate FF unit)
  pair × d at the BLAS rate measured in the same process (a (20000 × d) · (d × 32) product), plus the
  attention's Σn² scores × (exp + 15 passes), the readout (3 passes of T·d·C) and PyTorch's spot check
  (its forward pass over the tokens the run's certificate says it checked, ``torch_spot_check.tokens``,
  each costing the model's non-embedding matrix entries in multiply-adds, at the BLAS rate of the model's
  dtype: the float32 rate, measured the same way, for a float32 model);
* save: writing the model file's bytes once.

Medians over ``--repeats`` runs. The model hash is the SHA-256 of the tensors (names, dtypes, shapes,
bytes), the config and the token encoding; ``file_sha256`` is the SHA-256 of the whole file, and
``file_bytes_equal`` says whether it was the same in every repeat (a model file holds no run times). The
certificate digest covers every certificate figure except timings.
Output: a table per case on stdout and one JSON document at ``--out``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# the CoNLL-2003 files (never in this repository): ../shared/data/conll2003 beside the checkout, or $UATLAB_CONLL_DIR
CONLL = Path(os.environ.get("UATLAB_CONLL_DIR", Path(__file__).resolve().parents[2] / "shared/data/conll2003"))
HERE = Path(__file__).resolve()

# the CLI with its stage clock replaced by the process's CPU clock; reports peak RSS (kB) on stderr
_CHILD = """
import sys, time, resource
if {cpu}:
    time.perf_counter = time.process_time
from uatlab.cli import main
c = main(sys.argv[1:])
sys.stderr.write("MAXRSS %d\\n" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
sys.stderr.write("MAXRSS_CHILDREN %d\\n" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(c)
"""
CERT_FIELDS = (
    "correct_tokens",
    "certified",
    "certified_tokens",
    "ceiling_tokens",
    "min_certified_margin",
    "min_margin_at",
    "torch_spot_check",
    "certified_fraction",
)
# where the figures go unless --out says
DEFAULT_OUT = Path("benchmark-compile.json")
# timings of each few-millisecond kernel whose rate a bound uses (np.exp, an elementwise pass, a matrix product):
# their median is the rate
RATE_TIMINGS = 20
STAGES = (
    "startup",
    "read + encode",
    "attention (h per token)",
    "group contexts per word",
    "feed-forward construction",
    "certify",
    "save",
)


def uatlab_cmd(cpu_clock: bool) -> list[str]:
    return [sys.executable, "-c", _CHILD.format(cpu=cpu_clock)]


def model_hash(path: Path) -> str:
    """SHA-256 of a saved model's tensors, config and token encoding (not its timing metadata)."""
    from safetensors import safe_open

    h = hashlib.sha256()
    with safe_open(str(path), framework="numpy") as f:
        meta = f.metadata() or {}
        for name in sorted(f.keys()):
            t = f.get_tensor(name)
            h.update(f"{name}|{t.dtype}|{t.shape}|".encode())
            h.update(t.tobytes())
    extra = json.loads(meta.get("uatlab_extra", "{}"))
    h.update(meta.get("uatlab_config", "").encode())
    h.update(json.dumps(extra.get("encoding"), sort_keys=True).encode())
    return h.hexdigest()


def certificate_digest(fig: dict) -> str:
    return hashlib.sha256(json.dumps({k: fig.get(k) for k in CERT_FIELDS}, sort_keys=True).encode()).hexdigest()


def _vmhwm_mb(pid: int) -> float | None:
    """Peak resident set (VmHWM, Linux) of a live process in MB, or None."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _is_worker(p, kind: str) -> bool:
    """Whether process ``p`` (psutil) is a worker of the executor ``kind``: a Ray worker (it starts as python
    default_worker.py and renames itself ray::IDLE / ray::<task>; not the raylet, whose command line names that
    script, nor Ray's agents ray::…Agent), or a worker of the local process pool (a spawned
    ``multiprocessing.spawn`` child; not the pool's resource tracker)."""
    name = p.name()
    cmd = " ".join(p.cmdline())
    if kind == "ray":
        return (name != "raylet" and "default_worker.py" in cmd) or (
            name.startswith("ray::") and not name.endswith("Agent")
        )
    return "multiprocessing.spawn" in cmd and "resource_tracker" not in cmd


def _sample_workers(root: int, kind: str, stop: threading.Event, peaks: dict[int, dict], every: float = 0.25) -> None:
    """Until ``stop``: the peak RSS (VmHWM) of every ``kind`` worker process (`_is_worker`) descending from process
    ``root``. Neither Ray's workers (grandchildren of the driver) nor the local pool's (reaped only when the
    compiling process exits) show in RUSAGE_CHILDREN while it runs. VmHWM is a high-water mark: a sample is the
    peak so far; growth in a worker's last ``every`` seconds before it exits is not seen."""
    import psutil

    while not stop.is_set():
        try:
            procs = psutil.Process(root).children(recursive=True)
        except psutil.Error:
            return
        for p in procs:
            try:
                if not (p.pid in peaks or _is_worker(p, kind)):
                    continue
                name = p.name()
            except psutil.Error:
                continue
            hwm = _vmhwm_mb(p.pid)
            if hwm is not None:
                seen = peaks.setdefault(p.pid, {"peak_rss_mb": 0.0, "names": []})
                seen["peak_rss_mb"] = max(seen["peak_rss_mb"], hwm)
                if name not in seen["names"]:
                    seen["names"].append(name)
        stop.wait(every)


def run_compile(name: str, args: list[str], workdir: Path, cpu_clock: bool = True, workers: str | None = None) -> dict:
    """One ``uatlab compile`` in a fresh process: its JSON, CPU, wall, peak RSS, model hash; with ``workers``
    ("ray" or "pool") also the peak RSS of each worker process of that executor (`_sample_workers`)."""
    out = workdir / f"{name}.safetensors"
    cmd = [*uatlab_cmd(cpu_clock), "compile", *args, "--out", str(out), "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    peaks: dict[int, dict] = {}
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        stop = threading.Event()
        sampler = threading.Thread(target=_sample_workers, args=(child.pid, workers, stop, peaks), daemon=True)
        if workers:
            sampler.start()
        stdout, stderr = child.communicate()
        stop.set()
        if workers:
            sampler.join()
    proc = subprocess.CompletedProcess(cmd, child.returncode, stdout, stderr)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        return {"case": name, "error": proc.stderr.strip()[-2000:]}
    fig = json.loads(proc.stdout)
    rss = {
        line.split()[0]: int(line.split()[1]) / 1024 for line in proc.stderr.splitlines() if line.startswith("MAXRSS")
    }
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    fig.update(
        case=name,
        wall_seconds=wall,
        cpu_seconds=cpu,
        peak_rss_mb=rss.get("MAXRSS"),
        peak_rss_worker_mb=rss.get("MAXRSS_CHILDREN"),
        # each worker process of the executor: its peak RSS and its process names (Ray: the tasks it ran)
        peak_rss_workers_mb=sorted(peaks.values(), key=lambda w: -w["peak_rss_mb"]) if workers else None,
        model_hash=model_hash(out),
        file_sha256=hashlib.sha256(out.read_bytes()).hexdigest(),
        certificate_digest=certificate_digest(fig),
        model_path=str(out),
    )
    if cpu_clock:  # stage_seconds are the compiling process's CPU seconds; the rest of its CPU is start-up
        fig["stage_seconds"] = {"startup": max(0.0, cpu - sum(fig["stage_seconds"].values())), **fig["stage_seconds"]}
    return fig


# ------------------------------------------------------------------------------------------------ bounds
def _parse(path: Path) -> tuple[list[list[str]], list[list[str]]]:
    """A plain parse: CoNLL (first column token, last column label, blank line / -DOCSTART- separate) or JSONL."""
    toks, labs = [], []
    if path.suffix.lower() in (".jsonl", ".json"):
        with path.open() as fh:
            for line in fh:
                if line.strip():
                    rec = json.loads(line)
                    toks.append(rec["tokens"])
                    labs.append(rec["labels"])
        return toks, labs
    t, lab = [], []
    with path.open() as fh:
        for line in fh:
            parts = line.split()
            if not parts or parts[0] == "-DOCSTART-":
                if t:
                    toks.append(t)
                    labs.append(lab)
                    t, lab = [], []
                continue
            t.append(parts[0])
            lab.append(parts[-1])
    if t:
        toks.append(t)
        labs.append(lab)
    return toks, labs


def _cpu(fn, *a):
    """(CPU seconds of one call of ``fn(*a)``, its result)."""
    t = time.process_time()
    out = fn(*a)
    return time.process_time() - t, out


def _median_cpu(fn, *a, reps: int = RATE_TIMINGS) -> float:
    """The median CPU time of ``reps`` timings of ``fn(*a)``: the machine's steady speed for a kernel of a few ms
    in this run. (A mean of a few timings is set by the first ones, which fault in their output's pages: 8 and
    6 ms against 0.7 ms for the 20000 × d · d × 32 product, so it put the BLAS rate at a quarter of what the
    machine does, and the certificate's bound at several times its value.)"""
    times = []
    for _ in range(reps):
        t = time.process_time()
        fn(*a)
        times.append(time.process_time() - t)
    return statistics.median(times)


def _query_candidates(dtype: str) -> int:
    try:
        from uatlab.constructions.paper_a.cor1_memorizer.select import check_request
    except ImportError:  # the single-module layout of earlier versions (for before/after comparisons)
        from uatlab.constructions.memorizer import _check_request as check_request
    return len(check_request(dtype, "auto", "auto")[1])


def _certificate_work(model_path: Path, toks: list[list[str]]) -> tuple[int, int, int, int, int]:
    """What the certificate must compute, from the model file: (token, candidate FF unit) pairs, d, labels C, FF
    width, and the multiply-adds per token of PyTorch's spot check (the certificate's own count,
    `uatlab.verify.certificate.spot_check_cost_per_token`)."""
    import numpy as np

    from uatlab.models.io import load_model
    from uatlab.verify.certificate import _BoundedModel, spot_check_cost_per_token

    model, extra = load_model(model_path)
    t2i = {t: i for i, t in enumerate(extra["encoding"]["tokens"])}
    ids = np.fromiter((t2i[t] for seq in toks for t in seq), np.int64)
    bm = _BoundedModel(model)
    spot_cost = spot_check_cost_per_token(model)
    width = model.config.layer_ff_width(0)
    d, C = model.config.d_model, model.config.num_labels
    if bm.gate is None:
        return len(ids) * width, d, C, width, spot_cost
    g = bm.gate
    per_code = np.bincount(g["unit_cid"][g["unit_cid"] >= 0], minlength=int(g["word_cid"].max()) + 1)
    return int(per_code[g["word_cid"][ids]].sum()), d, C, width, spot_cost


def measure_bounds(data: Path, model_path: Path, dtype: str, causal: bool, spot_tokens: int = 0) -> dict:
    """Lower bound per stage, CPU seconds, measured in this process (see the module docstring)."""
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits

    threadpool_limits(1)  # the bounds are single-thread rates
    threads = [{"library": i.get("internal_api"), "threads": i.get("num_threads")} for i in threadpool_info()]
    proc = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    startup = ru.ru_utime + ru.ru_stime
    assert proc.returncode == 0

    def read_encode():
        toks, labs = _parse(data)
        t2i, l2i = {}, {}
        ids = [[t2i.setdefault(t, len(t2i)) for t in s] for s in toks]
        _ = [[l2i.setdefault(y, len(l2i)) for y in s] for s in labs]
        for w in t2i:
            hashlib.blake2b(w.encode(), digest_size=8).digest()
        return toks, ids

    t_read, (toks, _) = _cpu(read_encode)
    lengths = np.array([len(s) for s in toks], dtype=np.int64)
    T = int(lengths.sum())
    sq = int((lengths * (lengths + 1) // 2).sum() if causal else (lengths**2).sum())
    K = _query_candidates(dtype)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(1_000_000)
    b = np.empty_like(a)
    t_exp = _median_cpu(np.exp, a, b) / a.size
    t_pass = _median_cpu(np.multiply, a, 1.000001, b) / a.size
    attention = K * sq * (t_exp + 5 * t_pass)
    word = rng.integers(0, max(1, T // 8), T)
    h = rng.random(T)

    from uatlab.constructions.paper_a.cor1_memorizer.contexts import group_value_order

    def group():
        o = group_value_order(word, h)  # = np.lexsort((h, word)), ~3x faster
        np.unique(word[o], return_index=True)

    t_group = K * _cpu(group)[0]
    pairs, d, C, width, spot_cost = _certificate_work(model_path, toks)
    A = rng.standard_normal((20_000, d))
    Bm = rng.standard_normal((d, 32))
    t_mm = _median_cpu(np.matmul, A, Bm)
    rate = 2 * A.shape[0] * d * 32 / t_mm  # flop/s of a tall-skinny product with k = d
    ff = 4 * 2 * pairs * d / rate
    att_cert = sq * (t_exp + 15 * t_pass)
    readout = 3 * 2 * T * d * C / rate
    spot_rate = rate  # PyTorch runs the model in its own dtype: a float32 model's products at the float32 rate
    if dtype == "float32":
        A32, B32 = A.astype(np.float32), Bm.astype(np.float32)
        spot_rate = 2 * A.shape[0] * d * 32 / _median_cpu(np.matmul, A32, B32)
    spot = 2 * spot_tokens * spot_cost / spot_rate
    params = sum(int(np.prod(s)) for s in _tensor_shapes(model_path))
    t_fill = _cpu(lambda: np.full(params, 1.0))[0]
    size = model_path.stat().st_size
    payload = np.zeros(size, np.uint8).tobytes()
    with tempfile.NamedTemporaryFile(dir=model_path.parent) as fh:
        t_save = _cpu(fh.write, payload)[0]
    return {
        "bounds": {
            "startup": startup,
            "read + encode": t_read,
            "attention (h per token)": attention,
            "group contexts per word": t_group,
            "feed-forward construction": t_fill,
            "certify": ff + att_cert + readout + spot,
            "save": t_save,
        },
        "inputs": {
            "tokens": T,
            "sum_n2": sq,
            "query_candidates": K,
            "ff_pairs": pairs,
            "d": d,
            "labels": C,
            "ff_width": width,
            "exp_ns": t_exp * 1e9,
            "pass_ns": t_pass * 1e9,
            "blas_gflops": rate / 1e9,
            "rate_timings": RATE_TIMINGS,
            "certify_parts": {"ff": ff, "attention": att_cert, "readout": readout, "spot_check": spot},
            "spot_check_tokens": spot_tokens,
            "spot_check_multiply_adds_per_token": spot_cost,
            "spot_check_gflops": spot_rate / 1e9,
        },
        "threads": threads,
    }


def _tensor_shapes(path: Path):
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        return [f.get_slice(k).get_shape() for k in f.keys()]


def run_bounds(data: Path, model_path: Path, dtype: str, causal: bool, spot_tokens: int = 0) -> dict:
    cmd = [
        sys.executable,
        str(HERE),
        "--probe-bounds",
        str(data),
        str(model_path),
        dtype,
        str(int(causal)),
        str(spot_tokens),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-2000:]}
    return json.loads(proc.stdout)


# ------------------------------------------------------------------------------------------------ cases
def median_case(
    name: str,
    args: list[str],
    work: Path,
    repeats: int,
    data: Path,
    dtype: str,
    causal: bool = False,
    with_bounds: bool = True,
) -> dict:
    """Run a case ``repeats`` times (each with its own bound measurement): medians of every figure."""
    runs, bounds = [], []
    for i in range(repeats):
        print(f"running {name} ({i + 1}/{repeats}) ...", file=sys.stderr, flush=True)
        r = run_compile(name, args, work)
        if "error" in r:
            return r
        runs.append(r)
        if with_bounds:
            spot = (r.get("torch_spot_check") or {}).get("tokens", 0)
            bounds.append(run_bounds(data, Path(r["model_path"]), dtype, causal, spot))
            if "error" in bounds[-1]:
                return {"case": name, "error": "bounds: " + bounds[-1]["error"]}
        Path(r["model_path"]).unlink()
    out = {k: v for k, v in runs[-1].items() if k not in ("stage_seconds", "wall_seconds", "cpu_seconds")}
    out["repeats"] = repeats
    out["model_hashes_equal"] = len({r["model_hash"] for r in runs}) == 1
    out["file_bytes_equal"] = len({r["file_sha256"] for r in runs}) == 1
    out["certificate_digests_equal"] = len({r["certificate_digest"] for r in runs}) == 1
    for key in ("wall_seconds", "cpu_seconds", "peak_rss_mb"):
        out[key] = statistics.median(r[key] for r in runs)
        out[key + "_all"] = [r[key] for r in runs]
    out["stage_seconds"] = {
        s: statistics.median(r["stage_seconds"].get(s, 0.0) for r in runs) for s in runs[0]["stage_seconds"]
    }
    if with_bounds:
        out["bound_seconds"] = {s: statistics.median(b["bounds"][s] for b in bounds) for s in bounds[0]["bounds"]}
        out["bound_inputs"] = bounds[-1]["inputs"]
        stage_sum = sum(out["stage_seconds"].get(s, 0.0) for s in STAGES)
        bound_sum = sum(out["bound_seconds"].values())
        out["ratio"] = {
            s: out["stage_seconds"][s] / out["bound_seconds"][s]
            for s in out["bound_seconds"]
            if s in out["stage_seconds"] and out["bound_seconds"][s] > 0
        }
        out["total_stage_cpu_seconds"] = stage_sum
        out["total_bound_seconds"] = bound_sum
        out["total_ratio"] = stage_sum / bound_sum
        if "certify" in out["ratio"]:
            out["certify_ratio"] = out["ratio"]["certify"]
    return out


def fit_slope(x: list[float], y: list[float]) -> float:
    """Least-squares slope of log y against log x."""
    lx, ly = [math.log(v) for v in x], [math.log(v) for v in y]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def scaling_cases(train: Path, work: Path, repeats: int, quick: bool) -> dict:
    """Compile CPU (excluding start-up) against tokens: nested subsets (first 1/8, 1/4, 1/2, all sentences)
    and copies (x1, x2, x4, x8); exponent = log-log least-squares slope."""
    toks, labs = _parse(train)
    fracs = (8, 4, 2, 1)
    copies = (1, 2) if quick else (1, 2, 4, 8)
    out: dict = {"subsets": [], "copies": []}

    def write(path: Path, seqs: list[int], times: int) -> None:
        with path.open("w") as fh:
            for _ in range(times):
                for i in seqs:
                    fh.write("".join(f"{t} {y}\n" for t, y in zip(toks[i], labs[i], strict=True)) + "\n")

    for kind, sizes in (("subsets", fracs), ("copies", copies)):
        for s in sizes:
            path = work / f"scale-{kind}-{s}.txt"
            if kind == "subsets":
                write(path, list(range(len(toks) // s)), 1)
            else:
                write(path, list(range(len(toks))), s)
            name = f"{kind}-{'1/' if kind == 'subsets' else 'x'}{s}"
            runs = []
            for i in range(repeats):
                print(f"running scaling {name} ({i + 1}/{repeats}) ...", file=sys.stderr, flush=True)
                r = run_compile(f"scale-{kind}-{s}", [str(path)], work)
                if "error" in r:
                    return {"error": f"{name}: {r['error']}"}
                Path(r["model_path"]).unlink()
                runs.append(r)
            cpu = statistics.median(sum(v for k, v in r["stage_seconds"].items() if k != "startup") for r in runs)
            cert = statistics.median(r["stage_seconds"].get("certify", 0.0) for r in runs)
            out[kind].append(
                {
                    "name": name,
                    "tokens": runs[0]["tokens"],
                    "compile_cpu_seconds": cpu,
                    "certify_cpu_seconds": cert,
                    "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
                    "model_hash": runs[0]["model_hash"],
                    "certified": runs[0]["certified"],
                }
            )
            path.unlink()
        pts = out[kind]
        out[f"{kind}_exponent"] = fit_slope([p["tokens"] for p in pts], [p["compile_cpu_seconds"] for p in pts])
        out[f"{kind}_certify_exponent"] = fit_slope([p["tokens"] for p in pts], [p["certify_cpu_seconds"] for p in pts])
    return out


def ray_case(train: Path, work: Path, copies: int, workers: int, quick: bool) -> dict:
    """CoNLL train repeated ``copies`` times: local executor vs ``--executor ray`` on a local ``workers``-worker
    Ray instance (wall clock: CPU of Ray's worker processes is not a child of this process; their peak RSS is
    sampled from /proc while the run lasts, `_sample_workers`, for both executors)."""
    data = work / f"conll-train-x{copies}.txt"
    text = train.read_text()
    with data.open("w") as fh:
        for _ in range(copies):
            fh.write(text + "\n")
    chunk = ["--chunk-tokens", str(50_000 if quick else 1_000_000)]
    res = {}
    for ex in ("local", "ray"):
        print(f"running ray case, executor {ex} ...", file=sys.stderr, flush=True)
        args = [str(data), *chunk, "--executor", ex, "--workers", str(workers)]
        res[ex] = run_compile(f"x{copies}-{ex}", args, work, cpu_clock=False, workers="ray" if ex == "ray" else "pool")
        if "error" in res[ex]:
            return {"error": f"{ex}: {res[ex]['error']}"}
        Path(res[ex]["model_path"]).unlink()
    data.unlink()
    keep = (
        "tokens",
        "certified",
        "wall_seconds",
        "cpu_seconds",
        "peak_rss_mb",
        "peak_rss_worker_mb",
        "peak_rss_workers_mb",
        "model_hash",
        "certificate_digest",
        "stage_seconds",
        "executor",
    )
    return {
        "copies": copies,
        "workers": workers,
        **{ex: {k: r.get(k) for k in keep} for ex, r in res.items()},
        "model_hash_equal": res["local"]["model_hash"] == res["ray"]["model_hash"],
        "certificate_equal": res["local"]["certificate_digest"] == res["ray"]["certificate_digest"],
    }


# ------------------------------------------------------------------------------------------------ output
def print_case(r: dict) -> None:
    if "error" in r:
        print(f"{r['case']}: ERROR {r['error']}")
        return
    print(
        f"\n== {r['case']}: {r['tokens']} tokens, certified {r['certified']} ({r['certified_tokens']}/"
        f"{r['ceiling_tokens']}), medians of {r['repeats']}: CPU {r['cpu_seconds']:.2f} s, wall "
        f"{r['wall_seconds']:.2f} s, peak RSS {r['peak_rss_mb']:.0f} MB; model hash {r['model_hash'][:16]} "
        f"(equal across runs: {r['model_hashes_equal']}; file bytes equal: {r['file_bytes_equal']})"
    )
    if "bound_seconds" not in r:
        return
    print(f"  {'stage':<28}{'CPU s':>9}{'bound s':>10}{'ratio':>8}")
    for s in STAGES:
        t, b = r["stage_seconds"].get(s, 0.0), r["bound_seconds"].get(s, float("nan"))
        print(f"  {s:<28}{t:>9.3f}{b:>10.3f}{(t / b if b > 0 else float('nan')):>8.2f}")
    print(
        f"  {'total':<28}{r['total_stage_cpu_seconds']:>9.3f}{r['total_bound_seconds']:>10.3f}{r['total_ratio']:>8.2f}"
    )


def warm_bytecode(work: Path) -> dict:
    """Bytecode caches for every process the benchmark starts, written once before any is timed.

    A process environment with PYTHONDONTWRITEBYTECODE set (as on some CI and container images) never caches the
    bytecode of an editable checkout, so every timed run compiled uatlab's modules again (about 60 of them, 0.16 s
    of "startup"), while torch's, installed by pip, were read from their caches. The children now read and write
    their caches under ``<work>/pycache`` (PYTHONPYCACHEPREFIX: nothing is written into the checkout or the
    environment's packages), filled by one small compile and one ``import torch`` here; the timed runs and the
    bounds' processes (the ``import torch`` of the start-up bound included) then all start from cached bytecode."""
    was_set = os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None
    os.environ["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
    tiny = work / "warm-up.jsonl"
    tiny.write_text(json.dumps({"tokens": ["a", "b", "a"], "labels": ["X", "Y", "X"]}) + "\n")
    subprocess.run(
        [*uatlab_cmd(False), "compile", str(tiny), "--out", str(work / "warm-up.safetensors"), "--json"],
        check=True,
        capture_output=True,
    )
    subprocess.run([sys.executable, "-c", "import torch"], check=True, capture_output=True)
    return {"pycache_prefix": os.environ["PYTHONPYCACHEPREFIX"], "dont_write_bytecode_was_set": was_set}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--probe-bounds":
        data, model, dtype, causal, spot = sys.argv[2:7]
        print(json.dumps(measure_bounds(Path(data), Path(model), dtype, causal == "1", int(spot))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI-sized cases only, one run each.")
    ap.add_argument("--repeats", type=int, default=None, help="Runs per case (default 3; --quick: 1).")
    ap.add_argument(
        "--cases",
        default="conll,synthetic,scaling",
        help="Comma-separated: conll, synthetic, scaling, ray (default: all but ray).",
    )
    ap.add_argument("--scaling-repeats", type=int, default=None, help="Runs per scaling point (default: --repeats).")
    ap.add_argument("--ray-copies", type=int, default=16, help="Copies of CoNLL train in the ray case.")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"Where to write the figures (replaced if it exists). Default: {DEFAULT_OUT} in the current folder, "
        "which is never replaced: a run that would is refused before it starts.",
    )
    args = ap.parse_args()
    repeats = args.repeats or (1 if args.quick else 3)
    wanted = set(args.cases.split(","))
    unknown = wanted - {"conll", "synthetic", "scaling", "ray"}
    if unknown:
        print(f"error: unknown case(s) {sorted(unknown)}: use conll, synthetic, scaling, ray", file=sys.stderr)
        return 2
    problem = out_problem(args.out)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.out is None:
        args.out = DEFAULT_OUT
    work = Path(tempfile.mkdtemp(prefix="uatlab-bench-"))
    try:
        return run_cases(args, repeats, wanted, work)
    finally:  # the benchmark's own folder: its data copies, bytecode caches and models
        shutil.rmtree(work, ignore_errors=True)


def out_problem(out: Path | None) -> str | None:
    """Why ``--out`` cannot be written at the end of the run (checked before it starts), or None."""
    if out is None:
        if DEFAULT_OUT.exists() or DEFAULT_OUT.is_symlink():
            return f"{DEFAULT_OUT} exists here (an earlier run's figures?): give --out to choose where to write"
        return None
    from uatlab.errors import InputError
    from uatlab.io_safety import check_output_file

    try:
        check_output_file(out)  # a folder, a special file, a read-only file, a loop of links
    except InputError as exc:
        return str(exc)
    if not out.parent.is_dir():  # a typo in the folder: refused rather than made
        return f"--out {out}: its folder {out.parent} does not exist"
    return None


def run_cases(args: argparse.Namespace, repeats: int, wanted: set[str], work: Path) -> int:
    """Every requested case, the figures written to ``args.out``; 1 if a case failed."""
    have_conll = (CONLL / "train.txt").is_file()
    train = CONLL / "train.txt"
    if args.quick and have_conll:  # first 1,000 sentences (kept in the temp dir only)
        from uatlab.data.conll import read_conll, write_conll

        head = work / "conll-head.txt"
        write_conll(read_conll(train)[:1000], head)
        train = head
    doc: dict = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cores": os.cpu_count(),
            "load_average_start": os.getloadavg(),
            "bytecode": warm_bytecode(work),
        },
        "repeats": repeats,
        "quick": args.quick,
        "cases": [],
        "scaling": None,
        "ray": None,
    }
    rows = doc["cases"]
    if "conll" in wanted and have_conll:
        tag = "conll-head-1000" if args.quick else "conll-train"
        for dt in ("float64",) if args.quick else ("float64", "float32"):
            rows.append(
                median_case(
                    f"{tag}-{dt[5:] and 'f' + dt[5:]}",
                    [str(train), "--dtype", dt],
                    work,
                    repeats,
                    train,
                    dt,
                    with_bounds=not args.quick,
                )
            )
    if "synthetic" in wanted:
        N, n, V, C = (2000, 16, 500, 10) if args.quick else (20_000, 32, 5_000, 10)
        syn = work / f"syn-{N}.jsonl"
        subprocess.run(
            [*uatlab_cmd(False), "synth", str(syn), "-N", str(N), "-n", str(n), "-V", str(V), "-C", str(C), "--json"],
            check=True,
            capture_output=True,
        )
        rows.append(median_case(f"synthetic-N{N}-f64", [str(syn)], work, repeats, syn, "float64"))
        # out of core: the same data in 8 on-disk chunks and buckets (must give the same model)
        rows.append(
            median_case(
                f"synthetic-N{N}-f64-chunked",
                [str(syn), "--chunk-tokens", str(N * n // 8)],
                work,
                1,
                syn,
                "float64",
                with_bounds=False,
            )
        )
        nocert = (
            {"error": "skipped"}
            if args.quick
            else run_compile(f"synthetic-N{N}-no-certify", [str(syn), "--no-certify"], work)
        )
        if "error" not in nocert:
            Path(nocert["model_path"]).unlink()
            whole = rows[-2]
            if "error" not in whole:
                whole["peak_rss_no_certify_mb"] = nocert["peak_rss_mb"]
                whole["certify_peak_increase"] = whole["peak_rss_mb"] / nocert["peak_rss_mb"] - 1
    if "scaling" in wanted and have_conll:
        doc["scaling"] = scaling_cases(train, work, args.scaling_repeats or repeats, args.quick)
    if "ray" in wanted and have_conll:
        doc["ray"] = ray_case(train, work, 2 if args.quick else args.ray_copies, 2, args.quick)
    doc["machine"]["load_average_end"] = os.getloadavg()
    from uatlab.io_safety import write_text_atomic

    write_text_atomic(args.out, json.dumps(doc, indent=2, default=str))
    for r in rows:
        print_case(r)
        if r.get("certify_peak_increase") is not None:
            print(
                f"  peak RSS without certify {r['peak_rss_no_certify_mb']:.0f} MB: certification adds "
                f"{100 * r['certify_peak_increase']:.1f} %"
            )
    if doc["scaling"]:
        s = doc["scaling"]
        if "error" in s:
            print(f"scaling: ERROR {s['error']}")
        else:
            for kind in ("subsets", "copies"):
                pts = ", ".join(f"{p['name']}: {p['tokens']} tok {p['compile_cpu_seconds']:.2f} s" for p in s[kind])
                print(
                    f"\nscaling {kind}: {pts}\n  exponent (compile CPU without start-up) {s[kind + '_exponent']:.3f}, "
                    f"certify {s[kind + '_certify_exponent']:.3f}"
                )
    if doc["ray"]:
        print(f"\nray case: {json.dumps(doc['ray'], default=str)}")
    print(
        f"\nload average start {doc['machine']['load_average_start']}, end {doc['machine']['load_average_end']} "
        "(shared machine)"
    )
    print(f"figures written to {args.out}")
    errors = [r for r in rows if "error" in r] + [x for x in (doc["scaling"], doc["ray"]) if x and "error" in x]
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
