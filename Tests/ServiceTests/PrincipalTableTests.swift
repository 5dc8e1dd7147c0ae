import Foundation
import Testing
@testable import Service

/// Token digests and the checks made on the configured principals at start.
@Suite struct PrincipalTableTests {
    @Test func tokenDigestIsSHA256AndComparesWholeDigests() throws {
        // sha256("abc"), the FIPS 180-2 example.
        let abc = try #require(TokenDigest.parseHex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        #expect(TokenDigest.sha256("abc") == abc)
        #expect(TokenDigest.parseHex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD") == abc)
        #expect(TokenDigest.equal(abc, abc))
        var last = abc
        last[31] ^= 1
        #expect(!TokenDigest.equal(abc, last))
        #expect(!TokenDigest.equal(abc, Array(abc.prefix(31))))
        for bad in ["", "ba78", String(repeating: "g", count: 64), String(repeating: "a", count: 65)] {
            #expect(TokenDigest.parseHex(bad) == nil, "\(bad)")
        }
    }

    private func table(_ principals: [PrincipalConfig]) throws -> PrincipalTable {
        var config = ServerConfig()
        config.principals = principals
        return try PrincipalTable(config)
    }

    private func principal(_ name: String, token: String? = nil, uid: UInt32? = nil) -> PrincipalConfig {
        PrincipalConfig(name: name, tokenHash: token.map(TokenDigest.sha256), uid: uid, isAdmin: false,
                        limits: PrincipalLimits())
    }

    @Test func theOwnerIsLocalUnlessAConfiguredPrincipalHasTheServersUID() throws {
        let plain = try table([principal("a", token: "ta")])
        #expect(plain.owner.name == "local")
        #expect(plain.owner.isAdmin)
        #expect(Set(plain.byName.keys) == ["a", "local"])
        let mine = try table([principal("me", uid: UInt32(geteuid()))])
        #expect(mine.owner.name == "me")
        #expect(mine.byName["local"] == nil)
    }

    @Test func conflictingDeclarationsAreRefused() {
        let cases: [([PrincipalConfig], String)] = [
            ([principal("a", token: "t"), principal("b", token: "t")], "same token"),
            ([principal("a", uid: 7), principal("b", uid: 7)], "uid 7"),
            ([principal("a", token: "x"), principal("a", token: "y")], "declared twice"),
            ([principal("local", uid: 9)], "built-in"),
            ([principal(".hidden", uid: 9)], "a name is"),
            ([principal("nothing")], "needs a"),
        ]
        for (principals, words) in cases {
            #expect {
                _ = try table(principals)
            } throws: { error in
                String(describing: error).contains(words)
            }
        }
    }
}
