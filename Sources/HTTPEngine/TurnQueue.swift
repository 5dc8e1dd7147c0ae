/// What waits for a later loop turn, first in first out: transfers waiting to join the
/// multi (`TransferEngine+Admission.swift`), ready sockets held back
/// (`TransferEngine+Readiness.swift`), cancelled transfers waiting to leave the multi
/// (`TransferEngine.cancel`). An array read from a head index: appending and taking the
/// first are constant time with no shifting, and once everything is taken the array is
/// emptied, keeping its storage unless a burst made it large.
struct TurnQueue<Element> {
    private var items: [Element] = []
    private var head = 0

    var count: Int { items.count - head }
    var isEmpty: Bool { head == items.count }
    /// The element `popFirst` would return, left in the queue.
    var first: Element? { head < items.count ? items[head] : nil }

    mutating func append(_ e: Element) { items.append(e) }

    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let e = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: items.capacity <= 1024)
            head = 0
        }
        return e
    }

    mutating func removeAll() {
        items = []
        head = 0
    }
}
