#if canImport(Glibc)
import Glibc
#endif
import CCurl
import CShims

/// A libcurl easy handle (`CURL *`). `CURL *` and `CURLM *` both import as raw pointers,
/// so each gets its own wrapper type: passing an easy handle where the multi is expected
/// is then a compile error instead of a crash. The wrapper owns nothing by itself; who
/// calls `curl_easy_cleanup` is said where the handle is made (`EasySlot`).
struct EasyHandle: Hashable {
    let raw: UnsafeMutableRawPointer

    /// Sets a `long` option. Every setopt returns the `CURLcode`; `set` turns a failure
    /// into a `TransferFailure` naming the option, so a bad value from a client becomes
    /// an error it can read rather than a silently ignored setting.
    func set(_ option: CURLoption, _ value: Int) throws {
        try check(xh_easy_setopt_long(raw, option, value), option)
    }

    /// Sets a `curl_off_t` option (the `_LARGE` sizes).
    func set(_ option: CURLoption, offset value: Int64) throws {
        try check(xh_easy_setopt_off(raw, option, curl_off_t(value)), option)
    }

    /// Sets a string option; libcurl copies the string (all string options since 7.17).
    func set(_ option: CURLoption, _ value: String) throws {
        try check(value.withCString { xh_easy_setopt_str(raw, option, $0) }, option)
    }

    /// Sets a pointer option (callback user data, `CURLOPT_PRIVATE`, the error buffer).
    func set(_ option: CURLoption, pointer value: UnsafeMutableRawPointer?) throws {
        try check(xh_easy_setopt_ptr(raw, option, value), option)
    }

    /// Sets a `curl_slist` option; the list must outlive the transfer (see `Transfer`).
    func set(_ option: CURLoption, list value: OpaquePointer?) throws {
        try check(xh_easy_setopt_slist(raw, option, UnsafeMutablePointer(value)), option)
    }

    private func check(_ code: CURLcode, _ option: CURLoption) throws {
        guard code != CURLE_OK else { return }
        let text = String(cString: curl_easy_strerror(code))
        // libcurl knows its options' names; say which one so the message is actionable.
        let name = curl_easy_option_by_id(option).flatMap { $0.pointee.name.map { String(cString: $0) } }
        throw TransferFailure(code: Int32(code.rawValue),
                              text: "\(text) (setting CURLOPT_\(name ?? String(option.rawValue)))")
    }

    /// Reads a `long` info field, or nil when libcurl does not have it.
    func info(long i: CURLINFO) -> Int? {
        var v = 0
        return xh_easy_getinfo_long(raw, i, &v) == CURLE_OK ? v : nil
    }

    /// Reads a `curl_off_t` info field.
    func info(offset i: CURLINFO) -> Int64? {
        var v: curl_off_t = 0
        return xh_easy_getinfo_off(raw, i, &v) == CURLE_OK ? Int64(v) : nil
    }

    /// Reads a string info field (copied: libcurl's string lives only as long as the handle).
    func info(string i: CURLINFO) -> String? {
        var p: UnsafeMutablePointer<CChar>? = nil
        guard xh_easy_getinfo_str(raw, i, &p) == CURLE_OK, let p else { return nil }
        return String(cString: p)
    }

    /// The same, given as `known` when libcurl's text is exactly its bytes: a string the
    /// caller holds anyway (the URL it asked for, which libcurl nearly always reports as
    /// the effective one) is shared rather than copied.
    func info(string i: CURLINFO, reusing known: String) -> String? {
        var p: UnsafeMutablePointer<CChar>? = nil
        guard xh_easy_getinfo_str(raw, i, &p) == CURLE_OK, let p else { return nil }
        var known = known
        let same = known.withUTF8 { k in
            guard let base = k.baseAddress, strlen(p) == k.count else { return false }
            return memcmp(p, base, k.count) == 0
        }
        return same ? known : String(cString: p)
    }

    /// Reads a pointer info field (`CURLINFO_PRIVATE`).
    func info(pointer i: CURLINFO) -> UnsafeMutableRawPointer? {
        var p: UnsafeMutableRawPointer? = nil
        return xh_easy_getinfo_ptr(raw, i, &p) == CURLE_OK ? p : nil
    }
}

/// The libcurl multi handle (`CURLM *`), distinct from `EasyHandle` for the same reason.
/// Owned by `TransferEngine`, which calls `curl_multi_cleanup` in `shutdown`.
struct MultiHandle {
    let raw: UnsafeMutableRawPointer

    func set(_ option: CURLMoption, _ value: Int) -> CURLMcode {
        xh_multi_setopt_long(raw, option, value)
    }
}

/// Values that are macros with casts in curl.h (`CURLAUTH_*` is `((unsigned long)1)<<n`)
/// and so do not import, or that import with a type we must convert at every use. Kept
/// in one place so each literal is checked against curl.h once.
enum Curl {
    static let authBasic = 1 << 0        // CURLAUTH_BASIC
    static let authDigest = 1 << 1       // CURLAUTH_DIGEST
    static let authNegotiate = 1 << 2    // CURLAUTH_NEGOTIATE
    static let authNTLM = 1 << 3         // CURLAUTH_NTLM
    static let writePause = Int(CURL_WRITEFUNC_PAUSE)
    static let readAbort = Int(CURL_READFUNC_ABORT)
    static let socketTimeout: curl_socket_t = CURL_SOCKET_TIMEOUT
    static let socketBad: curl_socket_t = CURL_SOCKET_BAD
    static let selectIn = Int32(CURL_CSELECT_IN)
    static let selectOut = Int32(CURL_CSELECT_OUT)
    static let selectErr = Int32(CURL_CSELECT_ERR)
    static let pollIn = Int32(CURL_POLL_IN)
    static let pollOut = Int32(CURL_POLL_OUT)
    static let pollInOut = Int32(CURL_POLL_INOUT)
    static let pollRemove = Int32(CURL_POLL_REMOVE)
    static let pauseCont = Int32(CURLPAUSE_CONT)
    static let pauseRecv = Int32(CURLPAUSE_RECV)
    static let pauseAll = Int32(CURLPAUSE_RECV | CURLPAUSE_SEND)  // CURLPAUSE_ALL
    static let readPause = Int(CURL_READFUNC_PAUSE)
    static let http11 = Int(CURL_HTTP_VERSION_1_1)
    static let http2 = Int(CURL_HTTP_VERSION_2_0)
    static let sslTLS12 = Int(CURL_SSLVERSION_TLSv1_2)
    static let sslTLS13 = Int(CURL_SSLVERSION_TLSv1_3)
    static let proxyHTTP = Int(CURLPROXY_HTTP.rawValue)
    static let seekOK = Int32(CURL_SEEKFUNC_OK)
    static let prereqOK = Int32(CURL_PREREQFUNC_OK)
    static let seekFail = Int32(CURL_SEEKFUNC_FAIL)
}
