import CCurl

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
final class EasySlot {
    let easy: EasyHandle
    let errorBuffer: UnsafeMutablePointer<CChar>

    /// Nil when libcurl cannot make a handle (out of memory).
    init?() {
        guard let raw = curl_easy_init() else { return nil }
        easy = EasyHandle(raw: raw)
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    /// Clears every option so the next transfer starts from libcurl's defaults.
    func reset() {
        curl_easy_reset(easy.raw)
        errorBuffer[0] = 0
    }

    deinit {
        curl_easy_cleanup(easy.raw)
        errorBuffer.deallocate()
    }
}
