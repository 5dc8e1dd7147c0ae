"""The soak (soak.py) for a few seconds, inside ``make test``: every action of the mixed
load runs, every body is exact, and at the end the daemon is the same process and holds
nothing (objects, transfers, buffered bytes, connections), with its descriptors back to
where they started. Counts only: how long anything took is never asserted. ``make soak``
runs the same load for 30 minutes and prints its samples.
"""

import unittest

from soak import ACTIONS, Soak


class ShortSoak(unittest.TestCase):
    def test_a_short_mixed_load_leaves_nothing_behind(self):
        with Soak(12, workers=4, seed=7, log=lambda _: None) as soak:
            summary = soak.run()
        self.assertEqual(summary["failures"], [])
        for name in ACTIONS:
            self.assertGreater(summary["counts"].get(name, 0), 0, name)
        self.assertEqual(summary["settled"], {"requests": 0, "sockets": 0, "transfersInFlight": 0,
                                              "bufferedBytes": 0, "connections": 0})


if __name__ == "__main__":
    unittest.main()
