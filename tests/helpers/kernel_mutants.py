"""Hand mutants of the compiled kernels (mutmut leaves numba-decorated functions alone):
each is applied, the kernel tests run, the file restored. Run from a scratch checkout
(it edits the package's files while it runs)::

    python tests/helpers/kernel_mutants.py
"""

import shutil
import subprocess
import sys

MUTANTS = [
    (
        "bayesij/array/kernels/psis.py",
        "return (m * k + 10 * 0.5) / (m + 10), -k / theta_hat",
        "return (m * k + 10 * 0.5) / (m + 9), -k / theta_hat",
    ),
    (
        "bayesij/array/kernels/psis.py",
        "            log_tail[i] = math.log1p(-(i + 0.5) / m)",
        "            log_tail[i] = math.log1p(-(i + 0.4) / m)",
    ),
    (
        "bayesij/array/kernels/psis.py",
        "        smoothed[i] = min((exp(-k * log_tail[i]) - 1.0) / k * sigma + top[0], 1.0)",
        "        smoothed[i] = min((exp(-k * log_tail[i]) - 1.0) / k * sigma + top[0], 2.0)",
    ),
    (
        "bayesij/array/kernels/waic.py",
        "    return top + math.log(total) - math.log(row.shape[0])",
        "    return top + math.log(total) - math.log(row.shape[0] - 1)",
    ),
    (
        "bayesij/array/kernels/waic.py",
        "        total += exp(max(alpha * row[s] - top, -708.0))",
        "        total += exp(max(alpha * row[s] - top, -70.0))",
    ),
    (
        "bayesij/array/kernels/mcse.py",
        "    return squares / (count - 1)",
        "    return squares / count",
    ),
    (
        "bayesij/array/kernels/values.py",
        "        count += (not v < limit) | ((v < -limit) & ((v != -math.inf) | (not minus_inf)))",
        "        count += (not v < limit) | ((v < -limit) & ((v != -math.inf) & (not minus_inf)))",
    ),
    (
        "bayesij/array/kernels/autocorrelation.py",
        "        out[0, r] = 1.0",
        "        out[0, r] = 0.99",
    ),
    (
        "bayesij/array/kernels/screen.py",
        "        elif low > heap[0]:",
        "        elif low >= heap[0] + 1e-3:",
    ),
    (
        "bayesij/array/kernels/screen.py",
        "        if not excluded[u] and negated * approximate[u] + scale * slack[u] >= threshold:",
        "        if not excluded[u] and negated * approximate[u] >= threshold:",
    ),
    (
        "bayesij/array/kernels/screen.py",
        "        sums[j] = sums[j] / n",
        "        sums[j] = sums[j] / (n - 1)",
    ),
    (
        "bayesij/array/kernels/set_weights.py",
        "    raw = min(0.2 * n_total, 3 * math.sqrt(n_total / max(r_eff[0], 1e-3)))",
        "    raw = min(0.2 * n_total, 2 * math.sqrt(n_total / max(r_eff[0], 1e-3)))",
    ),
    (
        "bayesij/array/kernels/set_weights.py",
        "    tail = np.full(1, min(math.ceil(raw), n_total - 1))",
        "    tail = np.full(1, min(math.floor(raw), n_total - 1))",
    ),
    (
        "bayesij/array/kernels/rows.py",
        "            for i in range(done + 1, size):",
        "            for i in range(done + 2, size):",
    ),
    (
        "bayesij/array/kernels/rows.py",
        "            mean += weights[s] * row[s]",
        "            mean += row[s] / n",
    ),
    (
        "bayesij/array/kernels/rows.py",
        "            term = weights[s] * (ratio[s] * (row[s] - mean) - phi)",
        "            term = weights[s] * (ratio[s] * (row[s] - mean))",
    ),
]


def main() -> None:
    killed = 0
    for path, old, new in MUTANTS:
        killed += run(path, old, new)
    print(f"{killed} of {len(MUTANTS)} killed")


def run(path: str, old: str, new: str) -> bool:
    """Apply one mutant, run the kernel tests, restore the file; True when a test failed."""
    text = open(path).read()
    if old not in text:
        raise ValueError(f"{path}: the mutated line is gone: {old.strip()}")
    shutil.copy(path, path + ".orig")
    try:
        with open(path, "w") as out:
            out.write(text.replace(old, new, 1))
        tests = [
            "tests/array/kernels",
            "tests/array/test_waic.py",
            "tests/array/test_ess.py",
            "tests/array/test_loo.py",
            "tests/array/test_checks.py",
        ]
        command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
        code = subprocess.run(command, capture_output=True, text=True, timeout=900).returncode
    finally:
        shutil.move(path + ".orig", path)
    print(f"{'killed' if code else 'SURVIVED'}: {path}: {new.strip()[:70]}", flush=True)
    return code != 0


if __name__ == "__main__":
    main()
