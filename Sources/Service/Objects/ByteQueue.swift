/// A FIFO of bytes: appended at the back as the transfer delivers them, read from the
/// front by `getReceiveBuffer`. Reading advances an index; the storage is compacted
/// only when the read part dominates, so each byte is copied a bounded number of times.
struct ByteQueue {
    private var storage: [UInt8] = []
    private var head = 0

    var count: Int { storage.count - head }
    /// The memory held, in bytes (for tests).
    var capacity: Int { storage.capacity }
    var isEmpty: Bool { count == 0 }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if head > 0, head >= storage.count / 2 { compact() }
        storage.append(contentsOf: bytes)
    }

    /// The first `n` unread bytes, without consuming them.
    func peek(_ n: Int) -> ArraySlice<UInt8> {
        storage[head..<(head + min(n, count))]
    }

    /// Consumes `n` bytes (at most what is there). Emptied, the queue keeps its memory
    /// if it is small, or if `keepingMemory` (it is about to fill again).
    mutating func consume(_ n: Int, keepingMemory: Bool = false) {
        head += min(n, count)
        if head == storage.count {
            storage.removeAll(keepingCapacity: keepingMemory || storage.capacity <= 1 << 20)
            head = 0
        }
    }

    mutating func removeAll() {
        storage = []
        head = 0
    }

    private mutating func compact() {
        storage.removeFirst(head)
        head = 0
    }
}
