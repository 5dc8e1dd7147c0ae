import CCurl
import Testing
@testable import HTTPEngine
import TestSupport

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
        req.body = .bytes(FixturePattern.bytes(count: 200_000))
        let r = try h.fetch(req)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.head?.status == 200)
        #expect(try h.finish() == [])
    }

    /// Digest with SHA-256 (RFC 7616), as the server asks for it.
    @Test(arguments: [("s3cret", 200), ("wrong", 401)])
    func digestSHA256(password: String, status: Int) throws {
        let h = try Harness()
        var req = TransferRequest(url: h.url("/digest-auth/alice/s3cret?algorithm=SHA-256"))
        req.user = "alice"
        req.password = password
        req.auth = .digest
        let r = try h.fetch(req)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.head?.status == status)
        #expect(json(r)["authenticated"] as? Bool == (status == 200))
        #expect(try h.finish() == [])
    }

    /// This libcurl has GSS-API and SPNEGO, so NEGOTIATE is accepted; with no Kerberos
    /// ticket and a server that offers only Basic it sends no credentials and the
    /// request ends cleanly with the server's 401. NTLM against a Basic-only server: the same.
    @Test(arguments: [AuthScheme.negotiate, .ntlm])
    func schemeTheServerDoesNotOfferGets401(scheme: AuthScheme) throws {
        let features = curl_version_info(CURLVERSION_FIRST)?.pointee.features ?? 0
        #expect(features & CURL_VERSION_SPNEGO != 0)
        #expect(features & CURL_VERSION_GSSAPI != 0)
        #expect(features & CURL_VERSION_NTLM != 0)
        let h = try Harness()
        var req = TransferRequest(url: h.url("/basic-auth/alice/s3cret"))
        req.user = "alice"
        req.password = "s3cret"
        req.auth = scheme
        let r = try h.fetch(req)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.head?.status == 401)
        #expect(try h.finish() == [])
    }
}
