import Testing
@testable import HTTPEngine

/// The engine's per-transfer bookkeeping on its own, no I/O: `TransferRequest`'s rarely
/// set members (kept in a shared box) still behave as plain values, and `TransferSet`
/// keeps its members' places right as they come and go.
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
        var active = TransferSet(.active)
        var timed = TransferSet(.timed)
        for t in ts { active.insert(t) }
        active.insert(ts[0])  // already in: no second place
        timed.insert(ts[2])
        #expect(active.count == 4 && timed.count == 1)
        active.remove(ts[1])  // the last member takes its place
        active.remove(ts[1])  // not in any more: nothing happens
        #expect(active.count == 3 && !active.contains(ts[1]))
        #expect([0, 2, 3].allSatisfy { active.contains(ts[$0]) } && timed.contains(ts[2]) && !timed.contains(ts[0]))
        active.remove(ts[3])
        active.remove(ts[0])
        #expect(active.members.count == 1 && active.members[0] === ts[2] && active.contains(ts[2]))
        timed.removeAll()
        #expect(timed.isEmpty && !timed.contains(ts[2]) && active.contains(ts[2]))
    }
}
