#if canImport(Glibc)
import Glibc
#endif
import CCurl
import CShims
import Logging

/// The cookies of one principal, shared by all of its transfers: a libcurl share handle
/// (`curl_share_init`) sharing `CURL_LOCK_DATA_COOKIE`. Every easy handle attached to it
/// (`CURLOPT_SHARE`, set by `TransferEngine.configure` when a `TransferRequest` carries
/// the jar) stores the `Set-Cookie` it receives here and sends from here what matches;
/// libcurl does the matching (domain, path, expiry, `Secure` only in a secure context).
///
/// No lock callbacks are set: libcurl calls them only to serialise handles used from
/// several threads, and every handle of this process — transfers, this jar's own — is
/// driven from the loop's one thread, never two at once.
///
/// Lifetime, the part that must not go wrong: a share with easy handles attached cannot
/// be cleaned up (`curl_share_cleanup` refuses with `CURLSHE_IN_USE`), and freeing it
/// under an attached handle would leave that handle pointing at freed memory. So every
/// attached handle keeps the jar alive: an `EasySlot` holds a strong reference to the
/// jar it is attached to and drops it only after detaching (`EasySlot.reset`; a pooled
/// handle is not detached by `curl_easy_reset`, which keeps shares). The jar's own easy
/// handle (`control`, used to read, add and clear cookies outside a transfer) is
/// detached and cleaned up in `deinit`, just before the share.
///
/// Confined to the loop's thread, like the engine.
public final class CookieJar {
    /// The `CURLSH *`, for `CURLOPT_SHARE`.
    let share: UnsafeMutableRawPointer
    /// An easy handle that never runs a transfer: libcurl reads and edits a share's
    /// cookies only through an easy handle attached to it.
    private let control: EasyHandle

    /// Makes an empty jar. Throws when libcurl cannot (out of memory, or a libcurl built
    /// without cookies).
    public init() throws {
        guard let s = curl_share_init() else {
            throw TransferFailure(CURLE_OUT_OF_MEMORY, "curl_share_init failed: out of memory")
        }
        let rc = xh_share_setopt_lock_data(s, CURLSHOPT_SHARE, CURL_LOCK_DATA_COOKIE)
        guard rc == CURLSHE_OK else {
            curl_share_cleanup(s)
            throw TransferFailure(CURLE_FAILED_INIT, "Cannot make a cookie jar: \(String(cString: curl_share_strerror(rc)))")
        }
        guard let e = curl_easy_init() else {
            curl_share_cleanup(s)
            throw TransferFailure(CURLE_OUT_OF_MEMORY, "curl_easy_init failed: out of memory")
        }
        let attached = xh_easy_setopt_share(e, CURLOPT_SHARE, s)
        guard attached == CURLE_OK else {
            curl_easy_cleanup(e)
            curl_share_cleanup(s)
            throw TransferFailure(attached, "Cannot make a cookie jar: \(String(cString: curl_easy_strerror(attached)))")
        }
        share = s
        control = EasyHandle(raw: e)
    }

    deinit {
        _ = xh_easy_setopt_share(control.raw, CURLOPT_SHARE, nil)
        curl_easy_cleanup(control.raw)
        let rc = curl_share_cleanup(share)
        if rc != CURLSHE_OK {
            // An attached handle outlived the jar, which the slots' strong references
            // rule out. libcurl freed nothing, so nothing dangles; the share leaks.
            Logger(label: "xhrpc.http").error("curl_share_cleanup: \(String(cString: curl_share_strerror(rc)))")
        }
    }

    /// Every cookie in the jar that has not expired, session and persistent, in
    /// libcurl's order.
    public var cookies: [Cookie] {
        var list: UnsafeMutablePointer<curl_slist>? = nil
        guard xh_easy_getinfo_slist(control.raw, CURLINFO_COOKIELIST, &list) == CURLE_OK, let head = list else { return [] }
        defer { curl_slist_free_all(head) }
        let now = Int64(time(nil))
        var out: [Cookie] = []
        var node: UnsafeMutablePointer<curl_slist>? = head
        while let n = node {
            if let text = n.pointee.data, let c = Cookie(netscapeLine: Substring(String(cString: text))), !c.isExpired(at: now) {
                out.append(c)
            }
            node = n.pointee.next
        }
        return out
    }

    /// What the jar holds, expired cookies libcurl has not dropped yet included: the
    /// bytes of each cookie's line as libcurl writes it (domain, flags, path, expiry,
    /// name, value) plus `perCookie`, without parsing any (the principal's budget counts
    /// it after every transfer, so it must cost little more than libcurl's own listing).
    public func byteCount(perCookie: Int) -> Int {
        var list: UnsafeMutablePointer<curl_slist>? = nil
        guard xh_easy_getinfo_slist(control.raw, CURLINFO_COOKIELIST, &list) == CURLE_OK, let head = list else { return 0 }
        defer { curl_slist_free_all(head) }
        var n = 0
        var node: UnsafeMutablePointer<curl_slist>? = head
        while let c = node {
            if let text = c.pointee.data { n += perCookie + strlen(text) }
            node = c.pointee.next
        }
        return n
    }

    /// Adds a cookie as if a server had set it (replacing one with the same domain, path
    /// and name). libcurl may refuse it without saying so — an expired one, one for a
    /// public suffix, a `__Secure-` name without `Secure` — as it would from a server.
    public func add(_ cookie: Cookie) throws {
        try control.set(CURLOPT_COOKIELIST, cookie.netscapeLine)
    }

    /// Forgets every cookie, session and persistent.
    public func removeAll() {
        // "ALL" cannot fail: it only frees what the share holds.
        _ = try? control.set(CURLOPT_COOKIELIST, "ALL")
    }
}
