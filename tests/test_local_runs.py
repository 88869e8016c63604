"""How local runs share work between worker processes and manage memory (pipeline/runners.py, pipeline/spill.py)."""
from __future__ import annotations

import platform
import subprocess
import sys
from collections import Counter

import apache_beam as beam
import pytest
from apache_beam.transforms import userstate
from apache_beam.transforms.timeutil import TimeDomain
from conftest import TESTS, book_sections

from pipeline import runners
from pipeline.create import BuildInstances, CreateConfig, WriteShards, bucket_key
from pipeline.spill import SpillByKey, dealing_order, dealt


def real_bucket_sizes(num_buckets: int) -> Counter:
    """Characters per bucket of the real books cut into documents, as create's bucketing assigns them."""
    config = CreateConfig(inputs=[], output="", vocab="", num_buckets=num_buckets)
    sizes = Counter()
    for doc_id, text in book_sections(max_chars=3000):
        sizes[bucket_key(doc_id, "train", config)] += len(text)
    return sizes


def dealt_in_turn(order: list, sizes: dict, workers: int) -> list[int]:
    """Each worker's share when the k-th key goes to worker k mod workers, as Beam's local runner deals them."""
    shares = [0] * workers
    for k, key in enumerate(order):
        shares[k % workers] += sizes[key]
    return shares


def test_a_round_places_its_larger_keys_with_the_lighter_workers():
    assert dealing_order({"a": 10, "b": 9, "c": 8, "d": 1}, 2) == ["a", "b", "d", "c"]
    assert dealing_order({"a": 10, "b": 9, "c": 8}, 2) == ["a", "b", "c"]  # a short last round fills in turn
    assert dealing_order({"b": 5, "a": 5, "c": 1}, 1) == ["a", "b", "c"]  # one worker: largest first, then by key


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_real_buckets_dealt_in_turn_come_out_even(workers):
    sizes = real_bucket_sizes(32)
    assert len(sizes) == 32
    even = sum(sizes.values()) / workers
    shares = dealt_in_turn(dealing_order(sizes, workers), sizes, workers)
    largest_first = dealt_in_turn(sorted(sizes, key=lambda k: -sizes[k]), sizes, workers)
    assert sorted(dealing_order(sizes, workers)) == sorted(sizes)
    assert max(shares) / even < 1.02
    assert max(shares) < max(largest_first)


def test_spilled_keys_leave_in_key_order(tmp_path):
    sizes = real_bucket_sizes(12)
    spiller = SpillByKey(str(tmp_path), "documents")
    spiller.setup()
    spiller.start_bundle()
    for key, size in sizes.items():
        assert not list(spiller.process((key, "x" * size)))
    keys = [w.value[0] for w in spiller.finish_bundle()]
    assert keys == sorted(sizes)


def test_dealt_pairs_leave_grouped_by_key_in_dealing_order():
    pairs = [("b", 4), ("a", 1), ("c", 7), ("a", 2), ("b", 5), ("d", 1)]
    out = list(dealt((0, pairs), 2, weight=lambda v: v))
    assert sorted(out) == sorted(pairs)
    # Summed sizes b 9, c 7, a 3, d 1: b and c first; then a, the larger, goes where c (the lighter) went.
    assert out == [("b", 4), ("b", 5), ("c", 7), ("d", 1), ("a", 1), ("a", 2)]


def test_dealing_is_left_out_where_it_would_gather_too_many_places_on_one_worker():
    from pipeline.create import CreatePretrainingData
    from pipeline.spill import DEAL_MAX_PLACES

    def steps(num_buckets: int, num_shards: int, workers: int = 2) -> set[str]:
        options = runners.pipeline_options(["--direct_running_mode=multi_processing",
                                            f"--direct_num_workers={workers}"])
        config = CreateConfig(inputs=["in.jsonl"], output="out", vocab="vocab.txt", num_buckets=num_buckets,
                              num_shards=num_shards, input_bytes=2**20, spill_to_files=True)
        p = beam.Pipeline(options=options)
        _ = p | CreatePretrainingData(config, "sha", ["in.jsonl"])  # built, never run
        return {t.unique_name.split("/")[1] for t in p.to_runner_api().components.transforms.values()
                if t.unique_name.count("/") >= 1}

    assert {"deal buckets", "deal shards"} <= steps(26, 4)
    assert not {"deal buckets", "deal shards"} & steps(26, 4, workers=1)
    many = steps(DEAL_MAX_PLACES // 10, 12)  # a place per bucket and shard: more than one worker should gather
    assert "deal buckets" in many and "deal shards" not in many


# A fresh launcher deals real bucket sizes to two forked workers; each worker notes which keys reached it.
_DEAL_AND_NOTE = """
import os, sys
sys.path[:0] = [{root!r}]
import apache_beam as beam
from pipeline import runners, spill

def note(element):
    key, sizes = element
    with open(os.path.join({out!r}, str(os.getpid()) + "_" + key.replace("/", "-")), "w") as f:
        f.write(str(sum(sizes)))

options = runners.pipeline_options(["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
with runners.make_pipeline(options) as p:
    (p | beam.Create({pairs!r}) | spill.DealToWorkers(2, int) | beam.GroupByKey() | beam.Map(note))
"""


def test_dealt_keys_reach_two_workers_as_dealt(tmp_path):
    sizes = real_bucket_sizes(12)
    # Two values per key, as from two reading workers.
    pairs = sorted([(k, s // 2) for k, s in sizes.items()] + [(k, s - s // 2) for k, s in sizes.items()])
    script = _DEAL_AND_NOTE.format(root=str(TESTS.parent), pairs=pairs, out=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    shares = Counter()
    for noted in tmp_path.iterdir():
        shares[noted.name.split("_")[0]] += int(noted.read_text())
    assert len(shares) == 2 and sum(shares.values()) == sum(sizes.values())
    assert sorted(shares.values()) == sorted(dealt_in_turn(dealing_order(sizes, 2), sizes, 2))
    assert max(shares.values()) / (sum(sizes.values()) / 2) < 1.02


def test_local_workers_counts_as_the_local_runner_does():
    import multiprocessing

    def workers(*args):
        return runners.local_workers(runners.pipeline_options(list(args)))

    assert workers() == 1
    assert workers("--direct_running_mode=multi_processing", "--direct_num_workers=3") == 3
    assert workers("--direct_num_workers=0") == multiprocessing.cpu_count()
    assert workers("--runner=DataflowRunner", "--direct_num_workers=3") == 1


# After the setting, a freed 256 MB array stays in the process for the next one; without it glibc unmaps it.
_FREE_AND_MEASURE = """
import sys
import numpy as np
sys.path.insert(0, {root!r})
if sys.argv[1] == "keep":
    from pipeline import runners
    runners._keep_freed_memory()
def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
before = rss_mb()
block = np.ones(256 << 20, np.uint8)
del block
print(rss_mb() - before)
"""


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_local_runs_keep_the_memory_they_free():
    def kept_mb(mode: str) -> float:
        code = _FREE_AND_MEASURE.format(root=str(TESTS.parent))
        return float(subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True,
                                    check=True).stdout)

    assert kept_mb("keep") > 200
    assert kept_mb("default") < 50


class _Stateful(beam.DoFn):
    SEEN = userstate.BagStateSpec("seen", beam.coders.StrUtf8Coder())
    FLUSH = userstate.TimerSpec("flush", TimeDomain.WATERMARK)

    def process(self, element, seen=beam.DoFn.StateParam(SEEN), flush=beam.DoFn.TimerParam(FLUSH)):
        yield element

    @userstate.on_timer(FLUSH)
    def flushed(self, seen=beam.DoFn.StateParam(SEEN)):
        yield from seen.read()


class _Holder:
    """A method of another object, given to Map: the DoFn then carries a bound method of its own."""

    SEEN = userstate.BagStateSpec("other", beam.coders.StrUtf8Coder())

    def keyed(self, element, seen=beam.DoFn.StateParam(SEEN)):
        return element


def test_remembered_dofn_specs_are_those_beam_finds():
    from apache_beam.transforms.core import CallableWrapperDoFn

    before = userstate.get_dofn_specs  # an earlier local run in this process may have set it
    find = getattr(before, "beams_own", before)
    userstate.get_dofn_specs = find
    runners._remember_dofn_specs()
    remembered = userstate.get_dofn_specs
    try:
        assert remembered is not find
        config = CreateConfig(inputs=[], output="", vocab="")
        dofns = [_Stateful(), _Stateful(), BuildInstances(config), WriteShards(config), SpillByKey("", "x"),
                 CallableWrapperDoFn(len), CallableWrapperDoFn(str.upper), CallableWrapperDoFn(_Holder().keyed),
                 CallableWrapperDoFn(_Holder().keyed)]
        for dofn in dofns * 2:  # the second time from what was kept
            assert remembered(dofn) == find(dofn)
        assert remembered(_Stateful())[0] == {_Stateful.SEEN}
        assert remembered(CallableWrapperDoFn(_Holder().keyed)) == ({_Holder.SEEN}, set())
        assert remembered(CallableWrapperDoFn(len)) == (set(), set())
        runners._remember_dofn_specs()  # once is enough
        assert userstate.get_dofn_specs is remembered
    finally:
        userstate.get_dofn_specs = before
