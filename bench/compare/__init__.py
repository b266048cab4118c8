"""Side by side: our ansible-operator against operator-sdk's Go ansible-operator.

Both run out of cluster against the local control plane (started, or reused when up), one
after the other, each in a fresh namespace, with the same watches.yaml, roles, custom
resources and environment (`ANSIBLE_GATHERING=explicit`, the same
`--max-concurrent-reconciles`, the same Python venv for Ansible, our `operator_sdk.util`
collection on `ANSIBLE_COLLECTIONS_PATH`). Ours runs with `--ansible-backend runner` and,
when `ansible-operator run --help` offers it, `--ansible-backend fast` as a third column.

Modes:
  create  (default) for each N in --counts: create N Memcached CRs (size 1) at once, time
          create -> Successful and create -> converged (Successful and status.nodes lists
          `size` pods), the time to converge all, Ansible runs per second, CPU seconds and
          peak RSS of the operator's process tree.
  steady  as create, then change every CR's spec once (size 1 -> 2) and time re-convergence.
  idle    converge --idle-count CRs of a no-op role, then CPU seconds and RSS over
          --idle-seconds with no changes.
  scale   --scale-count no-op CRs exist before the operator starts: time until all are
          Successful, peak RSS.
  latency --latency-count Memcached CRs created one at a time, each once the operator has
          settled after the one before: create -> Successful of a single CR with nothing
          queued, for the first CR after the operator started and over all of them.

How CPU and memory are measured: a sampler thread walks the operator's process tree every
0.25 s through /proc/<pid>/task/*/children. CPU of the tree at an instant is the sum over
its live processes of utime+stime+cutime+cstime (/proc/<pid>/stat): a process that has
exited and been waited for is in its parent's cutime/cstime, so nothing is lost or counted
twice as long as every process waits for its children (Go's exec, ansible-runner, Ansible
and Python's subprocess all do). A phase's CPU is the difference between two samples.
When the operator exits, os.wait4() gives its rusage, which covers it and every waited-for
descendant over its whole life: printed as "lifetime CPU" to check the sampled figure.
RSS: the operator process's own VmRSS (peak of the samples, and VmHWM), and separately the
sum of the RSS of all its descendants per sample (peak over samples; shared pages of
forked workers count once per process, so this overstates; the PSS sum, read from
smaps_rollup every 2 s, is reported beside it).

Usage: .venv/bin/python -m bench.compare [--mode create] [--counts 1,20,100]
"""
