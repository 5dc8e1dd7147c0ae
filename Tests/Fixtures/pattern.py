"""The deterministic body pattern shared by the fixture upstream and the tests.

For a seed S, one block is 65521 bytes (the largest prime below 2**16, so the
period never lines up with power-of-two buffer sizes and a misplaced or
duplicated buffer shows up as a wrong byte):

    block[j] = (j*131 + (j>>8)*7 + S*17) & 0xFF

A body of length N is the block repeated and cut to N bytes, so byte i is
``block[i % 65521]``.  Swift tests regenerate the same bytes on their own.

Only the standard library is used; the module is imported by
``Tests/Fixtures/upstream.py`` and by the Python client tests.
"""

import functools
import hashlib

BLOCK_SIZE = 65521


@functools.lru_cache(maxsize=32)
def pattern_block(seed=0):
    """Return the 65521-byte block for ``seed`` (cached)."""
    base = (seed * 17) & 0xFF
    return bytes(((j * 131 + (j >> 8) * 7 + base) & 0xFF) for j in range(BLOCK_SIZE))


@functools.lru_cache(maxsize=32)
def _double_block(seed=0):
    # Two blocks back to back: any run of up to BLOCK_SIZE bytes starting at
    # any offset is one slice, without wrapping arithmetic at the call sites.
    block = pattern_block(seed)
    return block + block


def pattern_slice(offset, length, seed=0):
    """Bytes ``offset .. offset+length`` of the infinite pattern (length ≤ 65521)."""
    if length > BLOCK_SIZE:
        raise ValueError("pattern_slice length must be at most %d" % BLOCK_SIZE)
    start = offset % BLOCK_SIZE
    return _double_block(seed)[start:start + length]


def iter_pattern(n, seed=0, piece=BLOCK_SIZE, offset=0):
    """Yield the N pattern bytes from ``offset`` in pieces of at most ``piece`` bytes.

    Memory stays bounded by one piece whatever N is.
    """
    if piece <= 0:
        raise ValueError("piece must be positive")
    piece = min(piece, BLOCK_SIZE)
    pos = offset
    end = offset + n
    while pos < end:
        k = min(piece, end - pos)
        yield pattern_slice(pos, k, seed)
        pos += k


def pattern_bytes(n, seed=0):
    """Return the first ``n`` bytes of the pattern for ``seed``."""
    block = pattern_block(seed)
    whole, rest = divmod(n, BLOCK_SIZE)
    return block * whole + block[:rest]


def pattern_sha256(n, seed=0):
    """Return the hex SHA-256 of ``pattern_bytes(n, seed)`` without building it.

    Hashes sixteen blocks at a time (about 1 MiB), so a 1 GiB body takes about
    a second and a megabyte of memory.
    """
    block = pattern_block(seed)
    big = block * 16
    h = hashlib.sha256()
    whole, rest = divmod(n, len(big))
    for _ in range(whole):
        h.update(big)
    h.update(big[:rest])
    return h.hexdigest()


if __name__ == "__main__":
    import sys

    if len(sys.argv) not in (2, 3):
        sys.stderr.write("usage: pattern.py N [SEED]   # prints the SHA-256\n")
        sys.exit(2)
    print(pattern_sha256(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) == 3 else 0))
