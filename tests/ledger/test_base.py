import multiprocessing
import os

from toolkeeper.ledger import current_owner


def _owner_of_child(queue: "multiprocessing.Queue[str]") -> None:
    queue.put(current_owner())


def test_the_owner_names_this_process_and_a_forked_child_names_its_own() -> None:
    mine = current_owner()
    assert mine.endswith(f":{os.getpid()}")
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[str] = context.Queue()
    child = context.Process(target=_owner_of_child, args=(queue,))
    child.start()
    theirs = queue.get(timeout=30)
    child.join(timeout=30)
    assert theirs == f"{mine.rpartition(':')[0]}:{child.pid}"
    assert current_owner() == mine
