"""The seeded chaos soak (`bench/soak.py`): operator replicas on a private local cluster,
CRs created, changed and deleted all along, faults drawn from a seed, invariants checked
at the end.

One module per concern:

- `schedule.py`: the faults, drawn from the seed (pure: the same seed, the same faults);
- `project.py`: the operator project the replicas run, whose roles record every run they
  start and end in an append-only log (`runlog.py` reads it back, pure);
- `cluster.py`: the private cluster, its CRD and namespace, the admin client;
- `replicas.py`: the operator replicas, each behind a stallable TCP forwarder, restarted
  when they exit (as a Deployment's pods are);
- `workload.py`: creates, spec changes and deletes, around a target population;
- `faults.py`: carries each fault of the schedule out;
- `observe.py`: CPU and RSS over time, and the resources of each replica at a moment;
- `invariants.py`: the checks over what was recorded (pure), each with its evidence;
- `timeline.py`: every event on one clock, for the events around a failing check;
- `report.py`: the table, the JSON results and the chart;
- `run.py`: the phases of one soak, start to end.
"""
