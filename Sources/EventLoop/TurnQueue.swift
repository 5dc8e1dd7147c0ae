/// What waits for a later loop turn, first in first out: transfers waiting to join the
/// multi (`TransferEngine+Admission.swift`), ready sockets held back
/// (`TransferEngine+Readiness.swift`), cancelled transfers waiting to leave the multi
/// (`TransferEngine.cancel`); and the benchmark client's calls waiting for their
/// replies. An array read from a head index: appending and taking the first are
/// constant time with no shifting, and once everything is taken the array is emptied,
/// keeping its storage unless a burst made it large.
///
/// `@inlinable`, so that each user gets it specialized for its element type: the
/// engine's queues are on every request's path.
public struct TurnQueue<Element> {
    @usableFromInline var items: [Element] = []
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
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: items.capacity <= 1024)
            head = 0
        }
        return e
    }

    @inlinable public mutating func removeAll() {
        items = []
        head = 0
    }
}
