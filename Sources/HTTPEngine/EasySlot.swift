import CCurl
import CShims

/// A libcurl easy handle and the error buffer it writes into, kept together because
/// `CURLOPT_ERRORBUFFER` stores a bare pointer: the buffer must live exactly as long as
/// the handle may write to it.
///
/// Slots are pooled by the engine: a finished transfer's slot is `curl_easy_reset` and
/// reused by the next one, which saves libcurl's per-handle allocations (connections live
/// in the multi's cache, not in the handle, so reuse does not depend on this). The slot
/// owns the handle: `curl_easy_cleanup` runs in `deinit`, which happens only once the
/// handle is out of the multi (the engine drops slots only after
/// `curl_multi_remove_handle`).
///
/// A slot whose transfer carried a cookie jar is attached to the jar's share handle and
/// keeps the jar alive until `reset` detaches it: `curl_easy_reset` keeps a handle's
/// share (libcurl documents that it does), so without the explicit detach the next
/// transfer on this handle — another principal's, or one with cookies disabled — would
/// send and store the first one's cookies.
final class EasySlot {
    let easy: EasyHandle
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// The jar this handle is attached to (`CURLOPT_SHARE`), held so the share outlives
    /// the attachment; set by `TransferEngine.configure`, cleared by `reset`.
    var jar: CookieJar?

    /// Nil when libcurl cannot make a handle (out of memory).
    init?() {
        guard let raw = curl_easy_init() else { return nil }
        easy = EasyHandle(raw: raw)
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    /// Clears every option so the next transfer starts from libcurl's defaults.
    func reset() {
        detachJar()
        curl_easy_reset(easy.raw)
        errorBuffer[0] = 0
    }

    /// Takes the handle out of its jar: the cookie file list goes first (with a NULL
    /// `CURLOPT_COOKIEFILE` libcurl also drops the handle's pointer to the cookies and
    /// frees any private cookie store, so a list that a failed configure left unread
    /// cannot start one), then the share. Neither call can fail for a handle outside
    /// the multi, which is the only place a slot is reset or cleaned up.
    private func detachJar() {
        guard jar != nil else { return }
        _ = xh_easy_setopt_str(easy.raw, CURLOPT_COOKIEFILE, nil)
        _ = xh_easy_setopt_share(easy.raw, CURLOPT_SHARE, nil)
        jar = nil
    }

    deinit {
        detachJar()
        curl_easy_cleanup(easy.raw)
        errorBuffer.deallocate()
    }
}
