/// What a redirect hop sends, decided here and nowhere else (RFC 9110 §15.4, and the
/// Fetch standard's "HTTP-redirect fetch"). The engine follows redirects itself
/// (`TransferEngine+Redirects.swift`): libcurl 7.88 follows any 3xx that has a
/// `Location`, and keeps a custom method (`CURLOPT_CUSTOMREQUEST`) on every hop while
/// dropping its body, so a PUT answered with 301 went out again as a PUT without a
/// body. Pure: no I/O, tested on its own (`RedirectRuleTests`).
public enum RedirectRule {
    /// The codes that are followed. Any other 3xx, with or without a `Location`, is the
    /// response itself (300 Multiple Choices, 304 Not Modified, 305 Use Proxy, …).
    public static let followedCodes: Set<Int> = [301, 302, 303, 307, 308]

    /// Headers that describe a request's body: dropped with the body when a redirect
    /// turns the request into a GET (Fetch's request-body-header names).
    static let bodyHeaderNames: Set<String> = ["content-type", "content-encoding", "content-language", "content-location"]

    /// Headers that carry the caller's credentials: sent only to the origin the caller
    /// named, never to another one a redirect leads to (as libcurl does for its own
    /// redirects when `CURLOPT_UNRESTRICTED_AUTH` is off, and as Fetch does).
    /// `Proxy-Authorization` too: set by the caller on a request without a proxy it goes
    /// to the origin itself (a proxy's credentials are the proxy settings' own).
    static let credentialHeaderNames: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    /// The request for the hop to `url` after a `status` redirect.
    ///
    /// - Method and body: 303 turns anything but GET and HEAD into a GET without a
    ///   body; 301 and 302 do that to a POST only; every other method keeps its method
    ///   and body, and 307 and 308 keep both for every method.
    /// - Headers: the caller's, less the body's own headers once the body is gone, and
    ///   less `Authorization`, `Proxy-Authorization` and `Cookie` when `url` is not on the origin (scheme,
    ///   host, port) of the caller's URL; credentials (`user`, `password`) likewise.
    ///   Judged against the original origin, not the previous hop's: a chain that comes
    ///   back to the caller's origin gets the credentials again there, as with libcurl.
    ///
    /// `previous` is the hop that got the redirect, `original` the caller's request;
    /// `sameOrigin` says whether `url` is on the caller's origin.
    public static func nextHop(after status: Int, to url: String, previous: TransferRequest,
                               original: TransferRequest, sameOrigin: Bool) -> TransferRequest {
        var next = previous
        next.url = url
        let becomesGET = (status == 303 && previous.method != "GET" && previous.method != "HEAD")
            || ((status == 301 || status == 302) && previous.method == "POST")
        if becomesGET {
            next.method = "GET"
            next.body = .none
        }
        let bodyDropped = !original.body.isNone && next.body.isNone
        next.headers = original.headers.filter { h in
            let name = h.name.lowercased()
            if bodyDropped && bodyHeaderNames.contains(name) { return false }
            if !sameOrigin && credentialHeaderNames.contains(name) { return false }
            return true
        }
        next.user = sameOrigin ? original.user : nil
        next.password = sameOrigin ? original.password : nil
        return next
    }
}

extension TransferBody {
    var isNone: Bool {
        if case .none = self { return true }
        return false
    }
}
