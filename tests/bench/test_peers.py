"""``berth bench peers``: its workload, the arithmetic that judges it, its plot and its CLI.

We test these aspects:
- the Jobs are the same for a seed, spread evenly over the queues, of parallelism 4, with pod
  sizes and run times within their bounds;
- each system gets the Job as its users write it: Kueue's queue-name label (and
  kube-scheduler), or Berth's queue label and scheduler name; the run time for KWOK;
- weighted fair shares: never more than asked, never more than the cluster, all of it handed
  out when asked for, split by weight among queues that want more (hypothesis);
- the timeline's error is zero for a run that held exactly its fair shares, and the mean
  distance otherwise; only oversubscribed samples count; idle capacity while waiting;
- a report draws one panel per system, a held and a fair-share line per queue, and the titles
  carry the error, the rate and the partial gangs;
- the CLI refuses bad input naming the option: no --real, bad weights or run times, a
  --berth-config that berth run would refuse (settings, profile, YAML, a missing file), before
  any cluster starts;
- --berth-config reaches Berth: berth run gets it, and the report names it.
"""

from __future__ import annotations

import pathlib

import click.testing
import hypothesis
import pytest
from hypothesis import strategies as st

from berth.api import keys
from berth.cli import main, peers, peers_plot
from berth.cli import peers_workload as workload


def test_jobs_are_reproducible_and_spread_evenly() -> None:
    first = workload.jobs(40, ["a", "b", "c", "d"], seed=3, seconds=(5, 9))
    assert first == workload.jobs(40, ["a", "b", "c", "d"], seed=3, seconds=(5, 9))
    assert first != workload.jobs(40, ["a", "b", "c", "d"], seed=4, seconds=(5, 9))
    assert [sum(j.queue == q for j in first) for q in "abcd"] == [10, 10, 10, 10]
    assert {j.cpu for j in first} <= {1, 2, 3} and len({j.cpu for j in first}) > 1
    assert all(5 <= j.seconds <= 9 for j in first)
    assert len({j.name for j in first}) == 40


def test_each_system_gets_the_job_its_users_write() -> None:
    spec = workload.JobSpec("job-0001", "q2", cpu=3, seconds=17)
    kueue = workload.manifest(spec, system="kueue")
    berth = workload.manifest(spec, system="berth")
    for job in (kueue, berth):
        assert job["spec"]["parallelism"] == job["spec"]["completions"] == 4
        template = job["spec"]["template"]
        assert template["metadata"]["annotations"] == {keys.SIM_DURATION_ANNOTATION: "17s"}
        requests = template["spec"]["containers"][0]["resources"]["requests"]
        assert requests == {"cpu": "3", "memory": "6Gi"}
    assert kueue["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "q2"}
    assert "schedulerName" not in kueue["spec"]["template"]["spec"]
    assert berth["metadata"]["labels"] == {keys.QUEUE_LABEL: "q2"}
    assert berth["spec"]["template"]["spec"]["schedulerName"] == keys.DEFAULT_SCHEDULER_NAME


def test_fair_shares_split_by_weight_and_give_back_what_is_not_asked() -> None:
    weights = {"a": 1.0, "b": 1.0, "c": 2.0}
    assert workload.fair_shares(100, {"a": 100, "b": 100, "c": 100}, weights) == pytest.approx(
        {"a": 25, "b": 25, "c": 50}
    )
    # a asks less than its quarter: the rest goes to b and c by weight.
    assert workload.fair_shares(100, {"a": 10, "b": 100, "c": 100}, weights) == pytest.approx(
        {"a": 10, "b": 30, "c": 60}
    )
    assert workload.fair_shares(100, {"a": 0, "b": 0, "c": 0}, weights) == {
        "a": 0,
        "b": 0,
        "c": 0,
    }


@hypothesis.given(
    capacity=st.floats(1, 1000),
    asked=st.lists(st.floats(0, 2000), min_size=1, max_size=6),
    weights=st.lists(st.integers(1, 8), min_size=6, max_size=6),
)
def test_fair_shares_are_bounded_and_work_conserving(
    capacity: float, asked: list[float], weights: list[int]
) -> None:
    demands = {f"q{i}": d for i, d in enumerate(asked)}
    weight = {f"q{i}": float(weights[i]) for i in range(len(asked))}
    shares = workload.fair_shares(capacity, demands, weight)
    assert all(-1e-6 <= shares[q] <= demands[q] + 1e-6 for q in demands)
    assert sum(shares.values()) <= capacity + 1e-6
    assert sum(shares.values()) == pytest.approx(min(capacity, sum(asked)), rel=1e-6, abs=1e-6)
    # Among queues that did not get all they asked, shares follow weights.
    short = [q for q in demands if shares[q] < demands[q] - 1e-6]
    for q in short:
        for r in short:
            assert shares[q] / weight[q] == pytest.approx(shares[r] / weight[r], rel=1e-6)


def test_the_error_is_the_mean_distance_from_fair_share_while_oversubscribed() -> None:
    timeline = workload.Timeline(capacity=100.0, weights={"a": 1.0, "b": 3.0})
    # Oversubscribed and exactly fair: no error.
    timeline.samples.append(workload.Sample(0.0, {"a": 25, "b": 75}, {"a": 80, "b": 80}))
    # Oversubscribed, a holds 45 where 25 is fair, b 55 where 75 is: 0.2 each.
    timeline.samples.append(workload.Sample(1.0, {"a": 45, "b": 55}, {"a": 80, "b": 80}))
    # Not oversubscribed: whatever is held, it does not count.
    timeline.samples.append(workload.Sample(2.0, {"a": 10, "b": 0}, {"a": 10, "b": 0}))
    assert timeline.errors() == {"a": 0.1, "b": 0.1, "all": 0.1}
    assert timeline.idle_while_waiting() == 0.0
    series = timeline.series()
    assert series["a"][1] == (1.0, 0.45, 0.25)
    assert series["b"][2] == (2.0, 0.0, 0.0)


def test_idle_capacity_while_jobs_wait_is_reported() -> None:
    timeline = workload.Timeline(capacity=10.0, weights={"a": 1.0})
    timeline.samples.append(workload.Sample(0.0, {"a": 6}, {"a": 20}))
    timeline.samples.append(workload.Sample(1.0, {"a": 8}, {"a": 20}))
    assert timeline.idle_while_waiting() == 0.3
    assert workload.Timeline(10.0, {"a": 1.0}).errors() == {"a": None, "all": None}


def test_the_peers_plot_draws_shares_and_fair_shares_per_system(tmp_path: pathlib.Path) -> None:
    series = {"q0": [(0.0, 0.1, 0.2), (1.0, 0.3, 0.2)], "q1": [(0.0, 0.5, 0.6), (1.0, 0.6, 0.6)]}
    system = {
        "series": series,
        "fair_share_error": {"all": 0.07},
        "jobs_started_per_minute": 42.0,
        "partial_gangs": 3,
    }
    report = {
        "weights": {"q0": 1.0, "q1": 3.0},
        "jobs": 10,
        "parallelism": 4,
        "nodes": 2,
        "kueue_kube_scheduler": system,
        "berth": {**system, "partial_gangs": 0},
    }
    drawing = peers_plot.figure(report)
    axes = drawing.get_axes()
    assert len(axes) == 2
    assert len(axes[0].get_lines()) == 4  # held and fair share for two queues
    assert "0.07" in axes[0].get_title() and "42.0 Jobs/min" in axes[0].get_title()
    assert "3 partial gangs" in axes[0].get_title() and "0 partial" in axes[1].get_title()
    peers_plot.draw(report, tmp_path / "peers.png")
    assert (tmp_path / "peers.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "add --real"),
        (["--real", "--weights", "1,0"], "weights must be above 0"),
        (["--real", "--run-seconds", "30,10"], "low then high"),
        (["--real", "--weights", "a,b"], "comma-separated numbers"),
    ],
)
def test_bad_input_is_refused_naming_the_option(args: list[str], message: str) -> None:
    outcome = click.testing.CliRunner().invoke(main.cli, ["bench", "peers", *args])
    assert outcome.exit_code == 2, outcome.output
    assert message in outcome.output


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "plugins:\n  - name: Proportion\n    args: {starvationThresholdSeconds: -3}\n",
            "plugins[0].args.starvationThresholdSeconds",
        ),
        ("plugins:\n  - name: NoSuchPlugin\n", "NoSuchPlugin"),
        ("logLevel: loud\n", "unknown log level 'loud'"),
        ("plugins: [\n", "YAML"),
    ],
)
def test_a_berth_config_berth_run_would_refuse_is_refused_before_any_cluster(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    started: list[object] = []
    monkeypatch.setattr(peers, "measure", lambda **kwargs: started.append(kwargs))
    config = tmp_path / "berth.yaml"
    config.write_text(text)
    outcome = click.testing.CliRunner().invoke(
        main.cli, ["bench", "peers", "--real", "--berth-config", str(config)]
    )
    assert outcome.exit_code == 2, outcome.output
    assert "--berth-config" in outcome.output and message in outcome.output
    assert started == []


def test_a_missing_berth_config_is_refused(tmp_path: pathlib.Path) -> None:
    outcome = click.testing.CliRunner().invoke(
        main.cli, ["bench", "peers", "--real", "--berth-config", str(tmp_path / "none.yaml")]
    )
    assert outcome.exit_code == 2
    assert "does not exist" in outcome.output


def test_the_berth_config_reaches_berth_run_and_the_report(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "berth.yaml"
    config.write_text(
        "plugins:\n  - name: Gang\n  - name: Proportion\n"
        "    args: {starvationThresholdSeconds: 30}\n"
    )
    asked: list[dict[str, object]] = []

    def measure(**kwargs: object) -> dict[str, object]:
        asked.append(kwargs)
        return {"complete": True, "errors": [], "berth_config": str(kwargs["berth_config"])}

    monkeypatch.setattr(peers, "measure", measure)
    outcome = click.testing.CliRunner().invoke(
        main.cli, ["bench", "peers", "--real", "--berth-config", str(config)]
    )
    assert outcome.exit_code == 0, outcome.output
    assert asked[0]["berth_config"] == config
    command = peers.berth_command(config)
    assert command[1:] == ["run", "--log-level", "warning", "--config", str(config.resolve())]
    assert "--config" not in peers.berth_command(None)
