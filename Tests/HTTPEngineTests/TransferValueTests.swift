import SeededRandom
import Testing
@testable import HTTPEngine

/// The engine's per-transfer bookkeeping on its own, no I/O: `TransferRequest`'s rarely
/// set members (kept in a shared box) still behave as plain values, `TransferSet` keeps
/// its members' places right as they come and go, and `TransferDeadlines` always gives
/// the earliest deadline.
@Suite struct TransferValueTests {
    @Test func rarelySetMembersStayIndependentValues() {
        var a = TransferRequest(url: "http://a.test/")
        #expect(a.user == nil && a.password == nil && a.clientCertificate == nil)
        #expect(a.pinnedPublicKey == nil && a.proxy == nil)
        a.user = "u"
        a.password = "p"
        a.proxy = ProxySettings(host: "proxy.test", port: 3128)
        var b = a  // shares a's box until one of them changes
        b.user = "v"
        b.pinnedPublicKey = "sha256//AAAA"
        b.clientCertificate = ClientCertificate(certPath: "/c.pem", keyPath: "/k.pem")
        #expect(a.user == "u" && a.pinnedPublicKey == nil && a.clientCertificate == nil)
        #expect(b.user == "v" && b.password == "p" && b.proxy?.host == "proxy.test")
        #expect(b.pinnedPublicKey == "sha256//AAAA" && b.clientCertificate?.keyPath == "/k.pem")
        a.proxy = nil
        #expect(a.proxy == nil && b.proxy?.port == 3128)
        var c = TransferRequest(url: "http://c.test/")
        c.user = nil  // clearing an unset member leaves the request as it was
        #expect(c.user == nil && c.password == nil)
    }

    @Test func transferSetKeepsPlacesAcrossRemovals() {
        let delegate = Recorder()
        let ts = (0..<4).map { Transfer(request: TransferRequest(url: "http://t\($0).test/"), delegate: delegate) }
        var active = TransferSet()
        for t in ts { active.insert(t) }
        active.insert(ts[0])  // already in: no second place
        #expect(active.count == 4)
        active.remove(ts[1])  // the last member takes its place
        active.remove(ts[1])  // not in any more: nothing happens
        #expect(active.count == 3 && !active.contains(ts[1]))
        #expect([0, 2, 3].allSatisfy { active.contains(ts[$0]) })
        active.remove(ts[3])
        active.remove(ts[0])
        #expect(active.members.count == 1 && active.members[0] === ts[2] && active.contains(ts[2]))
        active.removeAll()
        #expect(active.isEmpty && !active.contains(ts[2]))
    }

    /// Thousands of random joins, moves (a pause's `.infinity`, an unpause's new
    /// deadline) and leaves, checked after each against a plain dictionary of what each
    /// member's deadline is: the earliest is the model's minimum, and every member's
    /// place points at itself. Then the members taken earliest first come in order.
    @Test func transferDeadlinesGivesTheEarliestThroughJoinsMovesAndLeaves() {
        let delegate = Recorder()
        let ts = (0..<64).map { Transfer(request: TransferRequest(url: "http://t\($0).test/"), delegate: delegate) }
        var timed = TransferDeadlines()
        var model: [ObjectIdentifier: Double] = [:]
        var rng = SplitMix64(seed: 0xDEAD_11E5)
        for step in 0..<5_000 {
            let t = ts[rng.below(ts.count)]
            let deadline = rng.below(8) == 0 ? Double.infinity : Double(rng.below(1_000))
            switch rng.below(3) {
            case 0:
                timed.insert(t, deadline: deadline)  // a member only moves
                model[ObjectIdentifier(t)] = deadline
            case 1:
                timed.move(t, to: deadline)  // a non-member stays out
                if model[ObjectIdentifier(t)] != nil { model[ObjectIdentifier(t)] = deadline }
            default:
                timed.remove(t)
                model[ObjectIdentifier(t)] = nil
            }
            #expect(timed.count == model.count, "step \(step)")
            #expect(timed.earliest?.deadline == model.values.min(), "step \(step)")
            if let (first, deadline) = timed.earliest { #expect(model[ObjectIdentifier(first)] == deadline, "step \(step)") }
            for (i, m) in timed.members.enumerated() { #expect(m.places.timed == i && timed.contains(m)) }
            for t in ts where model[ObjectIdentifier(t)] == nil { #expect(!timed.contains(t)) }
        }
        var last = -Double.infinity
        while let (t, deadline) = timed.earliest {
            #expect(deadline >= last && model[ObjectIdentifier(t)] == deadline)
            last = deadline
            timed.remove(t)
        }
        timed.insert(ts[0], deadline: 1)
        timed.removeAll()
        #expect(timed.isEmpty && !timed.contains(ts[0]) && ts[0].places.timed == -1)
    }
}
