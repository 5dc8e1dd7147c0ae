import HTTPEngine

/// Answering an authentication challenge with a stored credential (`credentials.set`,
/// `CredentialTable`): the request goes out without credentials; when the response is
/// a 401 whose `WWW-Authenticate` challenges match a credential of the principal for
/// the URL's protection space, that response is thrown away (its body never reaches
/// the buffer, the client never sees it) and the send is tried once more — attempt 2,
/// reported as SENT again like any retry — with the credential and only the scheme it
/// matched. A 407 from the request's proxy is answered the same way with the proxy's
/// protection space (`http://proxyhost:port`) and `Proxy-Authenticate`; a 407 refusing
/// an https URL's CONNECT tunnel ends the transfer with no response and no header to
/// read, and is answered from the schemes libcurl saw offered (`answersTunnelChallenge`).
/// The client
/// sees one request whose response is the authenticated one, or the challenge as it
/// came when nothing matched (or the credential was refused: the store is consulted
/// once per send).
///
/// What is never done: a credential is never sent before a server asked for one; never
/// to an origin other than the one that asked (the challenge must come from the
/// request's own URL's origin, not from a redirect's target — the retry starts again at
/// that URL, and the engine keeps credentials on same-origin hops only); never to
/// another scheme, port, host or realm than its entry's (an `https` entry is not
/// offered over `http`); never in another scheme than its `auth` when it has one.
/// Credentials given with the request itself (`open {user, password}`, or a proxy's
/// own) win: the store is not consulted for them.
extension HTTPRequest {
    /// Whether this head is a challenge to answer from the store; if so the transfer is
    /// discarded and the authenticated attempt planned for the next turn.
    func discardsForCredentials(_ t: Transfer, _ head: ResponseHead) -> Bool {
        guard head.status == 401 || head.status == 407, var request = planned, request.body.isReplayable,
              !principal.credentials.entries.isEmpty else { return false }
        if head.status == 401 {
            guard request.user == nil,
                  let asked = try? URLTarget.parse(url: request.url),
                  let answered = try? URLTarget.parse(url: t.currentURL) else { return false }
            let origin = ProtectionSpace(scheme: asked.scheme, host: asked.host, port: asked.port, realm: nil)
            guard origin.isOrigin(of: answered),
                  let m = principal.credentials.match(origin: origin, challenges: AuthChallenge.parse(Array(head.headers), fieldName: "WWW-Authenticate"),
                                                                mayNegotiate: principal.mayNegotiate)
            else { return false }
            request.user = m.user
            request.password = m.password
            request.auth = m.auth
        } else {
            guard var proxy = request.proxy, proxy.user == nil else { return false }
            let origin = ProtectionSpace(scheme: "http", host: proxy.host, port: proxy.port, realm: nil)
            guard let m = principal.credentials.match(origin: origin, challenges: AuthChallenge.parse(Array(head.headers), fieldName: "Proxy-Authenticate"),
                                                                mayNegotiate: principal.mayNegotiate)
            else { return false }
            proxy.user = m.user
            proxy.password = m.password
            proxy.auth = m.auth
            request.proxy = proxy
        }
        planned = request
        discarding = t
        // libcurl forbids removing a transfer from inside its callbacks: next turn.
        env.soon { [weak self] in
            guard let self, endDiscarded(t) else { return }
            retry()
        }
        return true
    }

    /// Whether a proxy's refusal of the CONNECT tunnel (an https URL: 407, so the
    /// transfer failed with no response) is answered from the store: the proxy's
    /// any-realm entry only, since libcurl shows the schemes the proxy offered but not
    /// its realm. If so the next attempt starts now, with the proxy credential (a
    /// transfer that ended may start the next one from its completion).
    func answersTunnelChallenge(_ t: Transfer) -> Bool {
        guard let offered = t.tunnelChallenge, var request = planned, request.body.isReplayable,
              var proxy = request.proxy, proxy.user == nil else { return false }
        let space = ProtectionSpace(scheme: "http", host: proxy.host, port: proxy.port, realm: nil)
        guard let m = principal.credentials.match(origin: space, challenges: offered.map { AuthChallenge(scheme: $0.rawValue, realm: nil) },
                                                      mayNegotiate: principal.mayNegotiate)
        else { return false }
        proxy.user = m.user
        proxy.password = m.password
        proxy.auth = m.auth
        request.proxy = proxy
        planned = request
        retry()
        return true
    }
}

extension TransferBody {
    /// Whether the body can be sent again from its start for a second attempt: bytes
    /// in memory are, and a file is read again from its start (what it holds then is
    /// sent), and so are multipart's segments, which are both. A body that could not be (a stream) would leave the challenge unanswered:
    /// the 401 or 407 is the response.
    var isReplayable: Bool {
        switch self {
        case .none, .bytes, .file, .segments: true
        }
    }
}
