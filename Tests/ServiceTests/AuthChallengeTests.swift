import HTTPEngine
import Testing
@testable import Service

/// `AuthChallenge.parse` (RFC 9110 §11 challenges) and `CredentialTable.match`: which
/// stored credential a challenge selects, with no I/O.
@Suite struct AuthChallengeTests {
    @Test func severalChallengesInOneFieldWithQuotedCommasAndEscapes() {
        let got = AuthChallenge.parse(field: #"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple, really", Digest realm = "d\\x" , qop="auth,auth-int", nonce="n""#)
        #expect(got == [
            AuthChallenge(scheme: "Newauth", realm: "apps"),
            AuthChallenge(scheme: "Basic", realm: "simple, really"),
            AuthChallenge(scheme: "Digest", realm: #"d\x"#),
        ])
    }

    @Test func token68AndBareSchemesHaveNoRealm() {
        #expect(AuthChallenge.parse(field: "Negotiate, NTLM TlRMTVNTUAACAAAA==, Basic realm=plain") == [
            AuthChallenge(scheme: "Negotiate", realm: nil),
            AuthChallenge(scheme: "NTLM", realm: nil),
            AuthChallenge(scheme: "Basic", realm: "plain"),
        ])
        #expect(AuthChallenge.parse(field: "Negotiate abc/def+g==") == [AuthChallenge(scheme: "Negotiate", realm: nil)])
    }

    @Test func malformedPiecesAreSkippedAndEveryFieldCounts() {
        #expect(AuthChallenge.parse(field: #"=x, Basic realm="unterminated"#).map(\.scheme) == ["Basic"])
        #expect(AuthChallenge.parse(field: "") == [])
        let headers = [(name: "www-authenticate", value: "Digest realm=\"a\""), (name: "Other", value: "Basic realm=x"),
                       (name: "WWW-Authenticate", value: "basic realm=\"b\"")]
        let got = AuthChallenge.parse(headers, fieldName: "WWW-Authenticate")
        #expect(got.map(\.realm) == ["a", "b"])
        #expect(got.map(\.known) == [.digest, .basic], "schemes compare without case")
    }

    private let origin = ProtectionSpace(scheme: "http", host: "Example.TEST", port: 8080, realm: nil)

    private func table(_ entries: [StoredCredential]) -> CredentialTable {
        var t = CredentialTable()
        for e in entries {
            let added = t.set(e)
            #expect(added)
        }
        return t
    }

    private func entry(_ realm: String?, _ user: String, auth: AuthScheme? = nil) -> StoredCredential {
        StoredCredential(space: origin.withRealm(realm), auth: auth, user: user, password: "pw-" + user)
    }

    @Test func exactRealmFirstThenAnyRealm() {
        let t = table([entry(nil, "any"), entry("R", "exact")])
        let basicR = [AuthChallenge(scheme: "Basic", realm: "R")]
        #expect(t.match(origin: origin, challenges: basicR) == CredentialMatch(user: "exact", password: "pw-exact", auth: .basic))
        #expect(t.match(origin: origin, challenges: [AuthChallenge(scheme: "Basic", realm: "other")])?.user == "any")
        #expect(table([entry("R", "exact")]).match(origin: origin, challenges: [AuthChallenge(scheme: "Basic", realm: "r")]) == nil,
                "realms compare exactly")
    }

    @Test func anotherOriginNeverMatches() {
        let t = table([entry(nil, "any")])
        let c = [AuthChallenge(scheme: "Basic", realm: "R")]
        #expect(t.match(origin: ProtectionSpace(scheme: "https", host: "example.test", port: 8080, realm: nil), challenges: c) == nil)
        #expect(t.match(origin: ProtectionSpace(scheme: "http", host: "example.test", port: 80, realm: nil), challenges: c) == nil)
        #expect(t.match(origin: ProtectionSpace(scheme: "http", host: "other.test", port: 8080, realm: nil), challenges: c) == nil)
        #expect(t.match(origin: ProtectionSpace(scheme: "HTTP", host: "[EXAMPLE.test]", port: 8080, realm: nil), challenges: c)?.user == "any",
                "hosts compare without case or brackets")
    }

    @Test func theSchemeIsTheEntrysOrTheStrongestChallenged() {
        let both = [AuthChallenge(scheme: "Basic", realm: "R"), AuthChallenge(scheme: "Digest", realm: "R"),
                    AuthChallenge(scheme: "Bearer", realm: "R")]
        #expect(table([entry(nil, "any")]).match(origin: origin, challenges: both)?.auth == .digest)
        #expect(table([entry("R", "b", auth: .basic)]).match(origin: origin, challenges: both)?.auth == .basic)
        #expect(table([entry(nil, "n", auth: .ntlm)]).match(origin: origin, challenges: both) == nil,
                "an entry's scheme must have been challenged")
        #expect(table([entry(nil, "any")]).match(origin: origin, challenges: [AuthChallenge(scheme: "Bearer", realm: nil)]) == nil)
        let ntlmAndNegotiate = [AuthChallenge(scheme: "NTLM", realm: nil), AuthChallenge(scheme: "Negotiate", realm: nil)]
        #expect(table([entry(nil, "any")]).match(origin: origin, challenges: ntlmAndNegotiate, mayNegotiate: true)?.auth == .negotiate)
    }

    /// Negotiate answers with xhrpcd's own Kerberos identity: a principal not granted it
    /// never has it chosen, whether its entry names it or leaves the scheme open.
    @Test func negotiateIsChosenOnlyWhenGranted() {
        let ntlmAndNegotiate = [AuthChallenge(scheme: "NTLM", realm: nil), AuthChallenge(scheme: "Negotiate", realm: nil)]
        #expect(table([entry(nil, "any")]).match(origin: origin, challenges: ntlmAndNegotiate)?.auth == .ntlm)
        #expect(table([entry(nil, "n", auth: .negotiate)]).match(origin: origin, challenges: ntlmAndNegotiate) == nil)
        #expect(table([entry(nil, "n", auth: .negotiate)]).match(origin: origin, challenges: ntlmAndNegotiate,
                                                                 mayNegotiate: true)?.auth == .negotiate)
    }

    @Test func removeNeedsTheSameKeyAndTheUserWhenGiven() {
        var t = table([entry(nil, "any"), entry("R", "exact")])
        let wrongUser = t.remove(origin.withRealm("R"), user: "any")
        let right = t.remove(origin.withRealm("R"), user: "exact")
        let again = t.remove(origin.withRealm("R"), user: nil)
        #expect(!wrongUser && right && !again)
        #expect(t.sorted.map(\.user) == ["any"])
    }
}
