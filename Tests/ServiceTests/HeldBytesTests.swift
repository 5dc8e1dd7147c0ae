import JSONRPC
import Testing
@testable import Service

/// `HeldBytes`, the count of what a client's calls made an object keep, against its
/// principal's `bufferedBytes` budget (docs/operations/budgets.md).
@Suite struct HeldBytesTests {
    private func principal(limit: Int) throws -> Principal {
        var limits = PrincipalLimits()
        limits.bufferedBytes = limit
        return try Principal(name: "p", limits: limits)
    }

    @Test func holdsUpToTheLimitAndRefusesPastItChangingNothing() throws {
        let p = try principal(limit: 100)
        let a = HeldBytes(principal: p)
        let b = HeldBytes(principal: p)
        try a.hold(60, for: "t")
        try b.hold(40, for: "t")
        #expect(p.bufferedBytes == 100)
        do {
            try a.hold(1, for: "setRequestHeader")
            Issue.record("a byte past the limit was held")
        } catch {
            #expect(error.json.objectValue?["data"] == ["reason": "limit_exceeded", "limit": "bufferedBytes", "max": 100])
        }
        #expect((a.count, b.count, p.bufferedBytes) == (60, 40, 100))
    }

    @Test func resizeRefusesOnlyGrowth() throws {
        let p = try principal(limit: 100)
        let a = HeldBytes(principal: p)
        try a.resize(to: 90, for: "t")
        try a.resize(to: 100, for: "t")
        #expect(throws: RPCError.self) { try a.resize(to: 101, for: "t") }
        try a.resize(to: 10, for: "t")
        #expect(p.bufferedBytes == 10)
    }

    @Test func releaseAndTheEndOfTheOwnerGiveEveryByteBack() throws {
        let p = try principal(limit: 100)
        let a = HeldBytes(principal: p)
        try a.hold(30, for: "t")
        a.releaseAll()
        #expect(p.bufferedBytes == 0)
        do {
            let gone = HeldBytes(principal: p)
            try gone.hold(70, for: "t")
            #expect(p.bufferedBytes == 70)
        }
        #expect(p.bufferedBytes == 0, "an object dropped without a release gives its bytes back")
    }

    @Test func credentialsCountWhoeverChangesThem() throws {
        let p = try principal(limit: 1 << 20)
        let space = ProtectionSpace(scheme: "https", host: "example.com", port: 443, realm: "r")
        let c = StoredCredential(space: space, auth: nil, user: "u", password: "secret")
        let added = p.credentials.set(c)
        #expect(added && p.bufferedBytes == c.heldBytes)
        let replaced = p.credentials.set(StoredCredential(space: space, auth: nil, user: "u", password: "s"))
        #expect(replaced && p.bufferedBytes == c.heldBytes - 5, "a replacement counts instead of the old entry")
        let removed = p.credentials.remove(space, user: nil)
        #expect(removed && p.bufferedBytes == 0)
    }
}
