import CCurl
import Glibc

extension TransferEngine {
    /// Process-wide libcurl setup (`curl_global_init`), which is not thread-safe and must
    /// run once, before any other thread exists and before the first engine: the server's
    /// `main` calls it, and so does a test process, once. Here so callers need not import
    /// libcurl's C module. Returns false when libcurl could not initialise (TLS library
    /// failure, out of memory); every transfer would then fail, so log it and stop.
    ///
    /// It also sets the character-type locale to C.UTF-8: libcurl turns an international
    /// host name into its ASCII (`xn--`) form with libidn2, which reads the name in the
    /// locale's character set. In the C locale every such URL failed as malformed, and
    /// the egress policy saw the name in UTF-8, where no pattern (written in `xn--` form)
    /// could match it. Only LC_CTYPE changes: numbers are still printed the C way.
    @discardableResult
    public static func globalInit() -> Bool {
        _ = setlocale(LC_CTYPE, "C.UTF-8")
        return curl_global_init(Int(CURL_GLOBAL_ALL)) == CURLE_OK
    }

    /// libcurl's version line ("libcurl/7.88.1 OpenSSL/3.0.19 …"), for logs and stats.
    public static var libcurlVersion: String { String(cString: curl_version()) }
}
