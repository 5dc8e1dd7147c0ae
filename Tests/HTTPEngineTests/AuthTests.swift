import Testing
@testable import HTTPEngine

/// Basic and Digest credentials work against the fixture; a wrong password ends in the
/// server's 401, which is a response, not a failure.
@Suite struct AuthTests {
    @Test(arguments: [(AuthScheme.basic, "basic-auth"), (AuthScheme.digest, "digest-auth")])
    func rightCredentialsAuthenticate(scheme: AuthScheme, endpoint: String) throws {
        let h = try Harness()
        var req = TransferRequest(url: h.url("/\(endpoint)/alice/s3cret"))
        req.user = "alice"
        req.password = "s3cret"
        req.auth = scheme
        let r = try h.fetch(req)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.headCount == 1)
        #expect(r.head?.status == 200)
        #expect(json(r)["authenticated"] as? Bool == true)
        #expect(json(r)["user"] as? String == "alice")
        #expect(try h.finish() == [])
    }

    @Test(arguments: [(AuthScheme.basic, "basic-auth"), (AuthScheme.digest, "digest-auth")])
    func wrongPasswordGets401(scheme: AuthScheme, endpoint: String) throws {
        let h = try Harness()
        var req = TransferRequest(url: h.url("/\(endpoint)/alice/s3cret"))
        req.user = "alice"
        req.password = "wrong"
        req.auth = scheme
        let r = try h.fetch(req)
        #expect(r.succeeded)
        #expect(r.head?.status == 401)
        #expect(r.head?.statusText == "Unauthorized")
        #expect(json(r)["authenticated"] as? Bool == false)
        #expect(try h.finish() == [])
    }

    /// A digest POST: the body goes out again after the 401 challenge.
    @Test func digestPostSendsBodyAfterChallenge() throws {
        let h = try Harness()
        var req = TransferRequest(method: "POST", url: h.url("/digest-auth/bob/pw"))
        req.user = "bob"
        req.password = "pw"
        req.auth = .digest
        req.body = .bytes(PatternChecker.bytes(count: 200_000))
        let r = try h.fetch(req)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.head?.status == 200)
        #expect(try h.finish() == [])
    }
}
