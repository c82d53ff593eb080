"""The Merkle tree of RFC 9162 (Certificate Transparency v2), section 2.1.

Leaf hash ``SHA-256(0x00 || leaf)``, node hash ``SHA-256(0x01 || left || right)``:
the prefixes keep a leaf from ever being passed off as a node (second
preimage). The tree over n leaves splits at the largest power of two below
n, so a tree of any size is a fold of the perfect subtrees its size's binary
digits name, which is what lets the server keep only complete subtrees.

Proofs are produced here as lists of *ranges* ``(start, end)`` of leaves
whose subtree hashes make up the proof; the server fetches those hashes from
its stored nodes in one query, and tests compute them from leaves.
"""

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence

Range = tuple[int, int]
Key = tuple[int, int]  # (level, index): the perfect subtree of 2**level leaves at index

EMPTY_ROOT = hashlib.sha256(b"").digest()


def leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def split(size: int) -> int:
    """The largest power of two strictly below ``size`` (size >= 2)."""
    return 1 << ((size - 1).bit_length() - 1)


# --------------------------------------------------------------------------- building


class Frontier:
    """A growing tree's perfect subtrees (at most one per level), left to right.

    Appending a leaf merges equal-height neighbours like a binary counter's
    carries; each merge completes one perfect subtree, which ``append``
    returns so that the caller can store it."""

    def __init__(self, size: int = 0, hashes: Sequence[bytes] = ()):
        self.size = size
        levels = [bit for bit in range(size.bit_length() - 1, -1, -1) if size >> bit & 1]
        if len(levels) != len(hashes):
            raise ValueError(f"a tree of {size} leaves has {len(levels)} perfect subtrees, "
                             f"not {len(hashes)}")
        self._stack: list[tuple[int, bytes]] = list(zip(levels, hashes, strict=True))

    def append(self, leaf: bytes) -> list[tuple[Key, bytes]]:
        """Add one leaf hash; return the subtrees it completed, (level, index) -> hash,
        the leaf itself (level 0) first."""
        position = self.size
        completed = [((0, position), leaf)]
        self._stack.append((0, leaf))
        while len(self._stack) >= 2 and self._stack[-1][0] == self._stack[-2][0]:
            level, right = self._stack.pop()
            _, left = self._stack.pop()
            merged = node_hash(left, right)
            self._stack.append((level + 1, merged))
            completed.append(((level + 1, position >> (level + 1)), merged))
        self.size += 1
        return completed

    def copy(self) -> "Frontier":
        return Frontier(self.size, [digest for _, digest in self._stack])

    def root(self) -> bytes:
        if not self._stack:
            return EMPTY_ROOT
        acc = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            acc = node_hash(left, acc)
        return acc


def frontier_keys(size: int) -> list[Key]:
    """The perfect subtrees a tree of ``size`` leaves is made of, left to right."""
    keys, start = [], 0
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            keys.append((level, start >> level))
            start += 1 << level
    return keys


def root_of(leaves: Iterable[bytes]) -> bytes:
    frontier = Frontier()
    for leaf in leaves:
        frontier.append(leaf)
    return frontier.root()


# --------------------------------------------------------------------------- proofs


def inclusion_ranges(index: int, size: int) -> list[Range]:
    """RFC 9162 2.1.3.1 PATH(m, D[n]) as the ranges whose hashes it lists, leaf first."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size} leaves")
    path: list[Range] = []
    start, end = 0, size
    while end - start > 1:
        k = split(end - start)
        if index - start < k:
            path.append((start + k, end))
            end = start + k
        else:
            path.append((start, start + k))
            start += k
    return path[::-1]


def consistency_ranges(first: int, second: int) -> list[Range]:
    """RFC 9162 2.1.4.1 PROOF(m, D[n]) as ranges (for 0 < m <= n)."""
    if not 0 < first <= second:
        raise ValueError(f"no consistency proof from {first} leaves to {second}")
    proof: list[Range] = []
    start, end, m, whole = 0, second, first, True
    while m != end - start:
        k = split(end - start)
        if m <= k:
            proof.append((start + k, end))
            end = start + k
        else:
            proof.append((start, start + k))
            start, m, whole = start + k, m - k, False
    if not whole:
        proof.append((start, end))
    return proof[::-1]


def range_keys(start: int, end: int) -> list[Key]:
    """The stored perfect subtrees whose hashes make up MTH(D[start:end])."""
    size = end - start
    if size & (size - 1) == 0 and start % size == 0:
        return [(size.bit_length() - 1, start // size)]
    k = split(size)
    return range_keys(start, start + k) + range_keys(start + k, end)


def range_hash(start: int, end: int, nodes: Mapping[Key, bytes]) -> bytes:
    size = end - start
    if size & (size - 1) == 0 and start % size == 0:
        return nodes[(size.bit_length() - 1, start // size)]
    k = split(size)
    return node_hash(range_hash(start, start + k, nodes), range_hash(start + k, end, nodes))


def subtree_name(key: Key) -> str:
    """How a multi-proof names a subtree: ``"level/index"``."""
    return f"{key[0]}/{key[1]}"


def subtree_key(name: str) -> Key:
    """The key a multi-proof's ``"level/index"`` names (ValueError if none)."""
    level, _, index = name.partition("/")
    key = (int(level), int(index))
    if key[0] < 0 or key[1] < 0:
        raise ValueError(f"{name!r} is not a subtree's name")
    return key


def halves(key: Key) -> list[Key]:
    """The two subtrees a stored subtree is the hash of (none for a leaf)."""
    level, index = key
    return [] if level == 0 else [(level - 1, 2 * index), (level - 1, 2 * index + 1)]


def inclusion_path(index: int, size: int, subtrees: Mapping[str, bytes]) -> list[bytes]:
    """The inclusion path of leaf ``index`` built from a multi-proof's subtrees
    (KeyError if one it needs is not there)."""
    named = {}
    for a, b in inclusion_ranges(index, size):
        for key in range_keys(a, b):
            named[key] = subtrees[subtree_name(key)]
    return [range_hash(a, b, named) for a, b in inclusion_ranges(index, size)]


def hashes_for(ranges: Sequence[Range], fetch: Callable[[set[Key]], Mapping[Key, bytes]]
               ) -> list[bytes]:
    """The hashes of ``ranges``, with every stored subtree they need fetched at once."""
    needed = {key for a, b in ranges for key in range_keys(a, b)}
    nodes = fetch(needed)
    return [range_hash(a, b, nodes) for a, b in ranges]


# --------------------------------------------------------------------------- checking


def root_from_inclusion(index: int, size: int, leaf: bytes, path: Sequence[bytes]) -> bytes:
    """RFC 9162 2.1.3.2: the root the path leads to, or ValueError if it cannot."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size} leaves")
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise ValueError("the inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ValueError("the inclusion proof is too short")
    return r


def consistent(first: int, first_root: bytes, second: int, second_root: bytes,
               proof: Sequence[bytes]) -> bool:
    """RFC 9162 2.1.4.2: does ``proof`` show that the tree of ``second`` leaves
    extends the tree of ``first`` leaves?"""
    if not 0 < first <= second:
        return False
    if first == second:
        return not proof and first_root == second_root
    path = list(proof)
    if first & (first - 1) == 0:
        path.insert(0, first_root)
    if not path:
        return False
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and fr == first_root and sr == second_root
