/// The live dashboard: a static page (HTML, CSS, JavaScript in
/// `Sources/Service/Operations/Dashboard/`, compiled in by the EmbedOpenRPC build plugin)
/// that connects to `/rpc` on its own origin, authenticates when the server asks, and
/// shows the principal's requests live (`subscribe {all, details}` and `list`).
///
/// The page is the same bytes for everyone and holds no secret; what it shows comes only
/// over `/rpc`, which needs the principal's token (`auth`) wherever principals have
/// tokens, and the page asks for it. On a loopback listener the files are served to
/// whoever reaches it, like the probes. On any other address (which needs principals)
/// they also need `Authorization: Bearer TOKEN` of a principal, as `/metrics` needs an
/// admin's: a browser sends that only through a proxy that adds it, which is how such a
/// listener is meant to be reached from outside.
enum DashboardPage {
    /// The page's files by path: body and media type.
    static func file(_ path: Substring) -> (body: String, contentType: String)? {
        switch path {
        case "/", "/index.html": (dashboardHTML, "text/html; charset=utf-8")
        case "/dashboard.js": (dashboardJS, "text/javascript; charset=utf-8")
        case "/dashboard.css": (dashboardCSS, "text/css; charset=utf-8")
        default: nil
        }
    }

    /// The headers of every file of the page: no sniffing, no framing, no referrer, and a
    /// policy that lets it load only its own files and connect only to `/rpc` under the
    /// listener's own origins (`connectOrigins`, as `ws://`).
    static func headers(connectOrigins: [String]) -> [(String, String)] {
        let ws = connectOrigins.map { "ws://" + $0.dropFirst("http://".count) }
        let policy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
            + "connect-src 'self' \(ws.joined(separator: " ")); base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
        return [("Content-Security-Policy", policy), ("X-Content-Type-Options", "nosniff"),
                ("X-Frame-Options", "DENY"), ("Referrer-Policy", "no-referrer")]
    }
}

extension Server {
    /// One file of the dashboard page, or 404.
    func dashboardResponse(_ path: Substring) -> OperationsConnection.Response {
        guard let file = DashboardPage.file(path) else {
            return .init(status: 404, body: Array("not found\n".utf8))
        }
        return .init(status: 200, body: Array(file.body.utf8), contentType: file.contentType,
                     extraHeaders: DashboardPage.headers(connectOrigins: dashboardOrigins))
    }
}
