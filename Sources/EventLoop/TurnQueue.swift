/// What waits for a later loop turn, first in first out: transfers waiting to join the
/// multi (`TransferEngine+Admission.swift`), ready sockets held back
/// (`TransferEngine+Readiness.swift`), cancelled transfers waiting to leave the multi
/// (`TransferEngine.cancel`), the fetches of closed connections waiting to be released
/// (`Server.releaseGoneFetchBatch`); and the benchmark client's calls waiting for their
/// replies. An array read from a head index: appending and taking the first are
/// constant time with no shifting.
///
/// A taken element's slot is cleared at once, so that the queue holds no reference to
/// what it gave out: a queue that held them until it was emptied freed 10,000 released
/// fetches in one turn, 16 ms of deinitializers. Once everything is taken the array is
/// emptied, keeping its storage unless a burst made it large; a queue that never quite
/// empties drops its taken slots once they are half of it, so that it does not grow
/// for as long as the load goes on.
///
/// `@inlinable`, so that each user gets it specialized for its element type: the
/// engine's queues are on every request's path.
public struct TurnQueue<Element> {
    @usableFromInline var items: [Element?] = []
    @usableFromInline var head = 0

    @inlinable public init() {}

    @inlinable public var count: Int { items.count - head }
    @inlinable public var isEmpty: Bool { head == items.count }
    /// The element `popFirst` would return, left in the queue.
    @inlinable public var first: Element? { head < items.count ? items[head] : nil }

    @inlinable public mutating func append(_ e: Element) { items.append(e) }

    @inlinable public mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let e = items[head]
        items[head] = nil
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: items.capacity <= TurnQueue.keptSlots)
            head = 0
        } else if head >= TurnQueue.keptSlots, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return e
    }

    /// Slots the array holds, taken ones included (for tests).
    public var storedSlots: Int { items.count }

    @inlinable public mutating func removeAll() {
        items = []
        head = 0
    }

    /// Storage an emptied queue keeps, and the taken slots a busy one carries at most
    /// (beyond this, until they are half of it).
    @usableFromInline static var keptSlots: Int { 1024 }
}
