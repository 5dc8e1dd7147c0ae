import CCurl

extension TransferEngine {
    /// Process-wide libcurl setup (`curl_global_init`), which is not thread-safe and must
    /// run once, before any other thread exists and before the first engine: the server's
    /// `main` calls it, and so does a test process, once. Here so callers need not import
    /// libcurl's C module. Returns false when libcurl could not initialise (TLS library
    /// failure, out of memory); every transfer would then fail, so log it and stop.
    @discardableResult
    public static func globalInit() -> Bool {
        curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK
    }

    /// libcurl's version line ("libcurl/7.88.1 OpenSSL/3.0.19 …"), for logs and stats.
    public static var libcurlVersion: String { String(cString: curl_version()) }
}
