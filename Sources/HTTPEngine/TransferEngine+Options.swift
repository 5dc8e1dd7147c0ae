import CCurl
import CShims

/// The mapping from `TransferRequest` to libcurl options, in one place: each option gets
/// the setter of its C type (`long`, `curl_off_t`, string, pointer, callback), which
/// curl's compile-time check cannot verify through the shim.
extension TransferEngine {
    /// Bodies up to this size are copied into libcurl (`CURLOPT_COPYPOSTFIELDS`), so head
    /// and body leave in one write; larger ones are read in place by the read callback.
    public static let copiedBodyLimit = 64 * 1024

    /// Methods with a meaning of their own to libcurl; any other token is sent with
    /// `CURLOPT_CUSTOMREQUEST`.
    private static let standardMethods: Set<String> = ["GET", "HEAD", "POST", "PUT"]

    /// Sets every option a transfer needs on a freshly reset handle. Throws on the first
    /// option libcurl refuses or on a request the engine refuses itself; the caller then
    /// resets the handle and releases what the transfer acquired (header list, upload).
    ///
    /// The handle comes from `curl_easy_reset` (or `curl_easy_init`), so an option whose
    /// wanted value is libcurl's default is left alone: each setopt costs a call, and a
    /// string option a copy. The reset itself stays — it is what guarantees that nothing
    /// of the previous transfer (body, method, credentials, headers, auth state) leaks
    /// into the next.
    func configure(_ slot: EasySlot, for t: Transfer, isHTTPS: Bool) throws {
        let e = slot.easy
        let r = t.hop
        let transferPointer = Unmanaged.passUnretained(t).toOpaque()
        let enginePointer = Unmanaged.passUnretained(self).toOpaque()

        // Plumbing: how libcurl finds us and reports back.
        slot.errorBuffer[0] = 0
        try e.set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(slot.errorBuffer))
        try e.set(CURLOPT_PRIVATE, pointer: transferPointer)
        try e.set(CURLOPT_NOSIGNAL, 1)
        try check(xh_easy_setopt_write_cb(e.raw, CURLOPT_WRITEFUNCTION, TransferCallbacks.write))
        try e.set(CURLOPT_WRITEDATA, pointer: transferPointer)
        try check(xh_easy_setopt_write_cb(e.raw, CURLOPT_HEADERFUNCTION, TransferCallbacks.header))
        try e.set(CURLOPT_HEADERDATA, pointer: transferPointer)
        try check(xh_easy_setopt_xferinfo_cb(e.raw, CURLOPT_XFERINFOFUNCTION, TransferCallbacks.progress))
        try e.set(CURLOPT_XFERINFODATA, pointer: transferPointer)
        try e.set(CURLOPT_NOPROGRESS, 0)
        try check(xh_easy_setopt_opensocket_cb(e.raw, CURLOPT_OPENSOCKETFUNCTION, TransferEngine.openSocketCallback))
        try e.set(CURLOPT_OPENSOCKETDATA, pointer: transferPointer)
        try check(xh_easy_setopt_closesocket_cb(e.raw, CURLOPT_CLOSESOCKETFUNCTION, TransferEngine.closeSocketCallback))
        try e.set(CURLOPT_CLOSESOCKETDATA, pointer: enginePointer)
        try check(xh_easy_setopt_prereq_cb(e.raw, CURLOPT_PREREQFUNCTION, TransferEngine.prerequestCallback))
        try e.set(CURLOPT_PREREQDATA, pointer: transferPointer)

        // Where, and over what. `start` already refused other schemes; the protocol
        // list is the second line of that defence.
        try e.set(CURLOPT_URL, URLTarget.wireForm(of: r.url))
        try e.set(CURLOPT_PROTOCOLS_STR, "http,https")
        if r.multiplexing {
            // HTTP/2 where TLS offers it (ALPN); cleartext stays HTTP/1.1: that is
            // libcurl's default (`CURL_HTTP_VERSION_2TLS` since 7.62 when built with
            // HTTP/2, HTTP/1.1 otherwise). PIPEWAIT makes a second transfer wait for the
            // first connection to a host to say whether it multiplexes rather than open
            // its own — worth it only for https, where that is known after the
            // handshake. For http:// libcurl 7.88 would wait for the first *response*,
            // so one slow request would hold up every other one to the same host; off is
            // the default.
            if isHTTPS { try e.set(CURLOPT_PIPEWAIT, 1) }
        } else {
            try e.set(CURLOPT_HTTP_VERSION, Curl.http11)
        }
        if r.forbidConnectionReuse { try e.set(CURLOPT_FORBID_REUSE, 1) }
        try configureTLS(e, r)
        // An empty no-proxy list turns off libcurl's reading of `no_proxy` and
        // `NO_PROXY` from the environment (two `getenv` scans per transfer): a proxy the
        // operator or the client chose is never skipped for a host that list names.
        try e.set(CURLOPT_NOPROXY, "")
        if let proxy = r.proxy {
            try configureProxy(e, proxy)
        } else {
            // An empty proxy turns off libcurl's reading of `http_proxy`, `https_proxy`
            // and `all_proxy` from the environment: where requests go is the operator's
            // choice through the flags (`--egress-proxy`) and the client's through
            // `enableHttpProxy`, never an accident of the daemon's environment.
            try e.set(CURLOPT_PROXY, "")
        }

        // Who asks: the request's own `User-Agent` and `Accept-Encoding` lines are
        // written by `configureHeaders`. A proxy's CONNECT carries the engine's
        // User-Agent only from the option; libcurl leaves out the line the option would
        // write when the request's headers have one. `CURLOPT_ACCEPT_ENCODING` stays
        // unset: libcurl 7.88 decodes only with it, and the engine decodes bodies
        // itself, checking that each coded stream ends (`ContentDecoder`).
        if r.proxy != nil, !options.userAgent.isEmpty { try e.set(CURLOPT_USERAGENT, options.userAgent) }
        // No proxy CONNECT heads in the header stream.
        try e.set(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)

        // Limits and redirects.
        guard r.timeout >= 0, r.timeout.isFinite else {
            throw TransferFailure(CURLE_BAD_FUNCTION_ARGUMENT, "Timeout must be 0 (none) or a positive number of seconds")
        }
        // The timeout is the engine's own clock, not `CURLOPT_TIMEOUT_MS`: libcurl's
        // runs on while a transfer is paused, and a paused transfer must not time out
        // (`TransferEngine+Pause.swift`).
        guard r.maxRedirects >= 0 else {
            throw TransferFailure(CURLE_BAD_FUNCTION_ARGUMENT, "maxRedirects must be 0 or more")
        }
        // Redirects are followed by the engine, not by libcurl (`FOLLOWLOCATION` stays
        // off; see `TransferEngine+Redirects.swift`).

        // Credentials.
        if let user = r.user {
            try e.set(CURLOPT_USERNAME, user)
            try e.set(CURLOPT_PASSWORD, r.password ?? "")
            try e.set(CURLOPT_HTTPAUTH, TransferEngine.authBits(r.auth))
        } else if r.auth == .negotiate {
            // Negotiate takes the client's identity from its Kerberos ticket cache
            // (KRB5CCNAME), not from a name; libcurl acts on CURLOPT_HTTPAUTH only once
            // a user name is set, so the empty name (curl's `-u :`) stands for "the
            // ticket's".
            try e.set(CURLOPT_USERNAME, "")
            try e.set(CURLOPT_HTTPAUTH, TransferEngine.authBits(r.auth))
        }

        // Cookies: the share holds them, and the cookie engine runs only once a cookie
        // file is named — "" names none, so nothing is read from disk. The slot takes
        // the jar before the share is set, so even a half-done attach is undone by
        // `EasySlot.reset`.
        if let jar = r.cookieJar {
            slot.jar = jar
            try check(xh_easy_setopt_share(e.raw, CURLOPT_SHARE, jar.share))
            try e.set(CURLOPT_COOKIEFILE, "")
        }

        // Method and body, then the headers (which depend on the body).
        let suppressContentType = try configureMethodAndBody(e, t)
        try configureHeaders(e, t, suppressContentType: suppressContentType)
    }

    /// Every content coding the engine decodes (`ContentDecoder.offered`): the list
    /// libcurl 7.88 offers for `CURLOPT_ACCEPT_ENCODING ""` ("deflate, gzip, br,
    /// zstd"), which `ContentEncodingTests` compares on the wire.
    static let acceptEncoding = ContentDecoder.offered

    /// The request's line that offers `acceptEncoding`, as C text.
    static let acceptEncodingLine = "Accept-Encoding: \(acceptEncoding)".utf8CString

    /// TLS settings. Set whatever the URL's scheme: an http:// request may be
    /// redirected to https://, and the hop must be held to the same rules. libcurl keeps
    /// these in the connection's SSL configuration and reuses a connection (or a TLS
    /// session) only for a transfer whose configuration matches, which is what keeps a
    /// relaxed connection away from a verifying request.
    private func configureTLS(_ e: EasyHandle, _ r: TransferRequest) throws {
        // libcurl's default minimum is TLS 1.0: always say ours.
        try e.set(CURLOPT_SSLVERSION, TransferEngine.sslVersionBits(options.tlsMin))
        if let caFile = options.caFile { try e.set(CURLOPT_CAINFO, caFile) }
        if !r.verifyPeer {
            try e.set(CURLOPT_SSL_VERIFYPEER, 0)
            try e.set(CURLOPT_SSL_VERIFYHOST, 0)
        } else if !r.verifyHost {
            try e.set(CURLOPT_SSL_VERIFYHOST, 0)
        }
        if let c = r.clientCertificate {
            try e.set(CURLOPT_SSLCERT, c.certPath)
            try e.set(CURLOPT_SSLCERTTYPE, "PEM")
            try e.set(CURLOPT_SSLKEY, c.keyPath)
            try e.set(CURLOPT_SSLKEYTYPE, "PEM")
            if let password = c.keyPassword { try e.set(CURLOPT_KEYPASSWD, password) }
            // libcurl matches a cached connection (and TLS session) on the certificate
            // path but not on the key or its password: a request with a wrong password
            // would ride a connection another request authenticated. A request that
            // proves a client identity therefore proves it on a connection of its own
            // and leaves nothing behind (`TLSClientCertificateTests`).
            try e.set(CURLOPT_FRESH_CONNECT, 1)
            try e.set(CURLOPT_FORBID_REUSE, 1)
            try e.set(CURLOPT_SSL_SESSIONID_CACHE, 0)
        }
        if let pins = r.pinnedPublicKey { try e.set(CURLOPT_PINNEDPUBLICKEY, pins) }
    }

    /// A forward HTTP proxy. https:// goes through a CONNECT tunnel (libcurl does that
    /// by itself for TLS through an HTTP proxy); the origin's certificate is verified
    /// inside it with the TLS settings above. The proxy is given as host and port, not
    /// as a URL, so an IPv6 literal or odd characters in a name cannot change its
    /// meaning, and the credentials travel in their own options, never in a URL that
    /// libcurl might quote in an error.
    private func configureProxy(_ e: EasyHandle, _ p: ProxySettings) throws {
        guard !p.host.isEmpty, (1...65535).contains(p.port) else {
            throw TransferFailure(CURLE_BAD_FUNCTION_ARGUMENT, "A proxy needs a host and a port from 1 to 65535")
        }
        try e.set(CURLOPT_PROXY, p.host.contains(":") ? "[\(p.host)]" : p.host)
        try e.set(CURLOPT_PROXYPORT, p.port)
        try e.set(CURLOPT_PROXYTYPE, Curl.proxyHTTP)
        if let user = p.user {
            try e.set(CURLOPT_PROXYUSERNAME, user)
            try e.set(CURLOPT_PROXYPASSWORD, p.password ?? "")
            try e.set(CURLOPT_PROXYAUTH, TransferEngine.authBits(p.auth))
        }
    }

    static func sslVersionBits(_ v: TLSVersion) -> Int {
        switch v {
        case .v1_2: return Curl.sslTLS12
        case .v1_3: return Curl.sslTLS13
        }
    }

    static func authBits(_ scheme: AuthScheme) -> Int {
        switch scheme {
        case .basic: return Curl.authBasic
        case .digest: return Curl.authDigest
        case .negotiate: return Curl.authNegotiate
        case .ntlm: return Curl.authNTLM
        }
    }

    /// Sets the method and body (see `TransferRequest` for the rules). Returns whether
    /// libcurl would add its own `Content-Type: application/x-www-form-urlencoded`, which
    /// the engine suppresses unless the request names a Content-Type itself: the engine
    /// sends the headers it was given, and invents none.
    private func configureMethodAndBody(_ e: EasyHandle, _ t: Transfer) throws -> Bool {
        let method = t.hop.method
        guard HTTPToken.isToken(method) else {
            throw TransferFailure(CURLE_BAD_FUNCTION_ARGUMENT, "Method \"\(method)\" is not a valid HTTP token")
        }
        if method == "HEAD" {
            try e.set(CURLOPT_NOBODY, 1)
            return false
        }
        switch t.hop.body {
        case .none:
            switch method {
            case "GET":
                return false
            case "POST", "PUT":
                // An empty body with `Content-Length: 0`, as browsers send it.
                try e.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: 0)
                try e.set(CURLOPT_COPYPOSTFIELDS, "")
                if method != "POST" { try e.set(CURLOPT_CUSTOMREQUEST, method) }
                return true
            default:
                try e.set(CURLOPT_CUSTOMREQUEST, method)
                return false
            }
        case .bytes(let bytes):
            try e.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: Int64(bytes.count))
            if bytes.isEmpty {
                try e.set(CURLOPT_COPYPOSTFIELDS, "")
            } else if bytes.count <= TransferEngine.copiedBodyLimit {
                // libcurl copies `POSTFIELDSIZE` bytes during this call.
                try check(bytes.withUnsafeBytes { b in
                    xh_easy_setopt_ptr(e.raw, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: b.baseAddress))
                })
            } else {
                try e.set(CURLOPT_POST, 1)
                try setUpload(e, t, UploadSource(bytes: bytes))
            }
            if method != "POST" { try e.set(CURLOPT_CUSTOMREQUEST, method) }
            return true
        case .file(let file) where method == "POST":
            // `upload`'s POST of a file: streamed by the read callback with its length.
            let source = try UploadSource(file: file)
            try e.set(CURLOPT_POST, 1)
            try e.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: source.size)
            try setUpload(e, t, source)
            return true
        case .segments(let segments):
            let source = try UploadSource(segments: segments)
            try e.set(CURLOPT_POST, 1)
            try e.set(CURLOPT_POSTFIELDSIZE_LARGE, offset: source.size)
            try setUpload(e, t, source)
            if method != "POST" { try e.set(CURLOPT_CUSTOMREQUEST, method) }
            return true
        case .file(let file):
            let source = try UploadSource(file: file)
            try e.set(CURLOPT_UPLOAD, 1)
            try e.set(CURLOPT_INFILESIZE_LARGE, offset: source.size)
            try setUpload(e, t, source)
            if !TransferEngine.standardMethods.contains(method) { try e.set(CURLOPT_CUSTOMREQUEST, method) }
            return false
        }
    }

    private func setUpload(_ e: EasyHandle, _ t: Transfer, _ source: UploadSource) throws {
        t.upload = source
        let transferPointer = Unmanaged.passUnretained(t).toOpaque()
        try check(xh_easy_setopt_read_cb(e.raw, CURLOPT_READFUNCTION, TransferCallbacks.read))
        try e.set(CURLOPT_READDATA, pointer: transferPointer)
        try check(xh_easy_setopt_seek_cb(e.raw, CURLOPT_SEEKFUNCTION, TransferCallbacks.seek))
        try e.set(CURLOPT_SEEKDATA, pointer: transferPointer)
    }

    /// Builds the header list (`Name: value`, or `Name;` for an empty value, libcurl's
    /// way to send an empty header rather than remove one). The list belongs to the
    /// transfer from here and is freed in `Transfer.releaseResources`.
    ///
    /// A request without a `User-Agent` of its own carries the engine's, and one that
    /// decodes without an `Accept-Encoding` of its own offers every coding the engine
    /// decodes. Both are lines of the list, made once, rather than libcurl's own
    /// (`CURLOPT_USERAGENT`, `CURLOPT_ACCEPT_ENCODING` alone), which it formats again for
    /// every request, a character at a time, twice: 14,000 of a `fetch`'s 165,000
    /// instructions.
    private func configureHeaders(_ e: EasyHandle, _ t: Transfer, suppressContentType: Bool) throws {
        var list: UnsafeMutablePointer<curl_slist>? = nil
        func append(_ line: UnsafePointer<CChar>) throws {
            guard let next = curl_slist_append(list, line) else {
                throw TransferFailure(CURLE_OUT_OF_MEMORY, "curl_slist_append failed: out of memory")
            }
            list = next
        }
        func append(_ line: ContiguousArray<CChar>) throws {
            try line.withUnsafeBufferPointer { try append($0.baseAddress!) }
        }
        do {
            var hasContentType = false, hasUserAgent = false, hasAcceptEncoding = false
            // With a cookie jar, the caller's `Cookie` goes in libcurl's own Cookie line,
            // after the jar's cookies: one field, as RFC 6265 §5.4 asks, where a line of
            // the list would be a second one.
            var callerCookies: [String] = []
            for (name, value) in t.hop.headers {
                guard HTTPToken.isToken(name) else {
                    throw TransferFailure(CURLE_BAD_FUNCTION_ARGUMENT, "Header name \"\(name)\" is not a valid HTTP token")
                }
                // The second line of defence: the Service layer refuses these names first.
                guard !TransferRequest.isReservedHeader(name) else {
                    throw TransferFailure(CURLE_BAD_FUNCTION_ARGUMENT, "Header \"\(name)\" is the engine's own (message framing and connection)")
                }
                guard !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                    throw TransferFailure(CURLE_BAD_FUNCTION_ARGUMENT, "Header \"\(name)\" has CR, LF or NUL in its value")
                }
                if HeaderName.equal(name, "Content-Type") { hasContentType = true }
                if HeaderName.equal(name, "User-Agent") { hasUserAgent = true }
                if HeaderName.equal(name, "Accept-Encoding") { hasAcceptEncoding = true }
                if t.hop.cookieJar != nil, !value.isEmpty, HeaderName.equal(name, "Cookie") {
                    callerCookies.append(value)
                    continue
                }
                try append(value.isEmpty ? "\(name);" : "\(name): \(value)")
            }
            if !callerCookies.isEmpty { try e.set(CURLOPT_COOKIE, callerCookies.joined(separator: "; ")) }
            if !hasUserAgent, let line = userAgentLine { try append(line) }
            if !hasAcceptEncoding, t.hop.decodesContent { try append(TransferEngine.acceptEncodingLine) }
            if suppressContentType && !hasContentType { try append("Content-Type:") }
        } catch {
            curl_slist_free_all(list)
            throw error
        }
        guard list != nil else { return }
        t.headerList = OpaquePointer(list)
        try e.set(CURLOPT_HTTPHEADER, list: t.headerList)
    }

    private func check(_ code: CURLcode) throws {
        guard code != CURLE_OK else { return }
        throw TransferFailure(code, "libcurl refused an option: \(String(cString: curl_easy_strerror(code)))")
    }
}
