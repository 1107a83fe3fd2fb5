#!/usr/bin/python3
"""The default thread count (`attend isa` prints it; every command uses it without -t):
one per physical core among the CPUs the process may run on, counted here independently
from sysfs; one when pinned to one CPU; $OMP_NUM_THREADS when set."""
import os
import subprocess

import testlib as T


def physical_cores(cpus):
    """Distinct (package, core) pairs among cpus; a CPU without topology counts alone."""
    seen, unknown = set(), 0
    for c in cpus:
        base = f"/sys/devices/system/cpu/cpu{c}/topology/"
        try:
            seen.add((open(base + "physical_package_id").read().strip(),
                      open(base + "core_id").read().strip()))
        except OSError:
            unknown += 1
    return len(seen) + unknown


def default_threads(env=None, cpus=None):
    e = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    e.update(env or {})
    p = subprocess.run([T.ATTEND, "isa"], capture_output=True, text=True, env=e,
                       preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    assert p.returncode == 0, p.stderr
    line = next(l for l in p.stdout.splitlines() if l.startswith("threads: "))
    return int(line.split()[1])


def main():
    r = T.Runner()
    mine = sorted(os.sched_getaffinity(0))

    def all_cpus():
        want = physical_cores(mine)
        got = default_threads()
        assert got == want, f"{got} threads by default, {want} physical cores in {mine}"
    r.check(f"default = physical cores of CPUs {mine}", all_cpus)

    def pinned():
        assert default_threads(cpus={mine[0]}) == 1
    r.check("pinned to one CPU: 1 thread", pinned)

    def omp_env():
        assert default_threads({"OMP_NUM_THREADS": "3"}) == 3
        assert default_threads({"OMP_NUM_THREADS": "5,2"}) == 5
        assert default_threads({"OMP_NUM_THREADS": "bogus"}) == physical_cores(mine)
    r.check("$OMP_NUM_THREADS wins when valid", omp_env)
    r.finish()


if __name__ == "__main__":
    main()
