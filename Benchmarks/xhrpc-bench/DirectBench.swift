import CCurl
import CShims

/// The ceiling: the same GETs made by libcurl alone, with no server in between.
///
/// One multi handle and `inflight` easy handles, each re-added to the multi as soon as its
/// transfer finishes, so the connection cache keeps `inflight` keep-alive connections busy.
/// The loop is `curl_multi_perform` + `curl_multi_poll`, the fastest way to drive libcurl
/// measured on this machine (docs/internals/C-INTEROP.md): it is what xhrpcd's libuv-driven
/// engine is compared against. Bodies are counted and discarded.
///
/// Blocking and single-threaded; it runs no libuv loop.
final class DirectBench {
    private let url: String
    private let inflight: Int
    private let expectedBodyBytes: Int

    /// How long to wait for transfers still running when the window closes.
    static let drainSeconds = 2.0

    init(url: String, inflight: Int, expectedBodyBytes: Int) {
        self.url = url
        self.inflight = inflight
        self.expectedBodyBytes = expectedBodyBytes
    }

    /// Bytes received by each easy handle's current transfer; the write callback gets a
    /// pointer to its handle's slot as `CURLOPT_WRITEDATA`.
    private final class Slots {
        let bytes: UnsafeMutablePointer<Int>
        let count: Int
        init(count: Int) {
            self.count = count
            bytes = .allocate(capacity: count)
            bytes.initialize(repeating: 0, count: count)
        }
        deinit { bytes.deallocate() }
    }

    /// Counts and discards a body. Non-capturing, as every C callback must be; the
    /// counter arrives through `userdata`.
    private static let discardBody: curl_write_callback = { _, size, nmemb, userdata in
        let n = size * nmemb
        userdata?.assumingMemoryBound(to: Int.self).pointee += n
        return n
    }

    /// Runs `warmup` seconds unmeasured, then `seconds` measured, then drains.
    /// `cpu` is read at the window's edges.
    func run(warmup: Double, seconds: Double, cpu: CPUWatch) -> ModeResult {
        var cpu = cpu
        var result = ModeResult(mode: "direct")
        guard let multi = curl_multi_init() else {
            result.failedToRun = true
            result.recordError("curl_multi_init failed")
            return result
        }
        // As many cached connections as transfers: every handle keeps its own connection.
        _ = xh_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, inflight)

        let slots = Slots(count: inflight)
        var easies: [UnsafeMutableRawPointer] = []
        defer {
            for e in easies {
                curl_multi_remove_handle(multi, e)
                curl_easy_cleanup(e)
            }
            curl_multi_cleanup(multi)
            withExtendedLifetime(slots) {}
        }
        for i in 0..<inflight {
            guard let e = curl_easy_init() else {
                result.failedToRun = true
                result.recordError("curl_easy_init failed")
                return result
            }
            easies.append(e)
            var rc = xh_easy_setopt_str(e, CURLOPT_URL, url)
            if rc == CURLE_OK { rc = xh_easy_setopt_long(e, CURLOPT_NOSIGNAL, 1) }
            if rc == CURLE_OK { rc = xh_easy_setopt_write_cb(e, CURLOPT_WRITEFUNCTION, DirectBench.discardBody) }
            if rc == CURLE_OK { rc = xh_easy_setopt_ptr(e, CURLOPT_WRITEDATA, UnsafeMutableRawPointer(slots.bytes + i)) }
            // The slot index, offset by one so that it is never a null pointer.
            if rc == CURLE_OK { rc = xh_easy_setopt_ptr(e, CURLOPT_PRIVATE, UnsafeMutableRawPointer(bitPattern: i + 1)) }
            if rc != CURLE_OK {
                result.failedToRun = true
                result.recordError("curl_easy_setopt: \(String(cString: curl_easy_strerror(rc)))")
                return result
            }
        }
        for e in easies { curl_multi_add_handle(multi, e) }

        let start = Monotonic.now()
        let measureFrom = start + UInt64(warmup * 1e9)
        let measureUntil = measureFrom + UInt64(seconds * 1e9)
        let drainUntil = measureUntil + UInt64(DirectBench.drainSeconds * 1e9)
        var measuring = false
        var windowClosed = false
        var completedAtStart = 0
        var completed = 0
        var active = inflight
        var running: Int32 = 0
        var drainTimedOut = false

        while active > 0 {
            let now = Monotonic.now()
            if !measuring && now >= measureFrom {
                measuring = true
                completedAtStart = completed
                cpu.start()
            }
            let accepting = now < measureUntil
            if !accepting && !windowClosed {
                // Close the window before handling what completed after its end.
                windowClosed = true
                result.seconds = Monotonic.seconds(from: measureFrom, to: now)
                result.completed = completed - completedAtStart
                result.cpu = cpu.perUnit(units: result.completed)
            }
            if now >= drainUntil {
                drainTimedOut = true
                break
            }

            let mrc = curl_multi_perform(multi, &running)
            if mrc != CURLM_OK {
                result.recordError("curl_multi_perform: \(String(cString: curl_multi_strerror(mrc)))")
                break
            }
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard message.pointee.msg == CURLMSG_DONE, let e = message.pointee.easy_handle else { continue }
                let code = message.pointee.data.result
                var privatePointer: UnsafeMutableRawPointer?
                _ = xh_easy_getinfo_ptr(e, CURLINFO_PRIVATE, &privatePointer)
                let index = Int(bitPattern: privatePointer) - 1
                let received = slots.bytes[index]
                slots.bytes[index] = 0
                if code != CURLE_OK {
                    result.recordError("transfer failed: \(String(cString: curl_easy_strerror(code)))")
                } else {
                    var status = 0
                    _ = xh_easy_getinfo_long(e, CURLINFO_RESPONSE_CODE, &status)
                    if status != 200 {
                        result.recordError("status \(status), expected 200")
                    } else if received != expectedBodyBytes {
                        result.recordError("body of \(received) bytes, expected \(expectedBodyBytes)")
                    } else {
                        completed += 1
                    }
                }
                // The handle must leave the multi before it can start again; its
                // connection goes back to the cache and the next transfer reuses it.
                curl_multi_remove_handle(multi, e)
                if accepting {
                    curl_multi_add_handle(multi, e)
                } else {
                    active -= 1
                }
            }
            if active == 0 { break }
            // Waits for socket activity or libcurl's own timeout, at most 100 ms so the
            // deadlines above are checked even when nothing happens.
            curl_multi_poll(multi, nil, 0, 100, nil)
        }
        if !windowClosed {
            // The loop ended early, on an error.
            result.seconds = measuring ? Monotonic.seconds(from: measureFrom, to: min(Monotonic.now(), measureUntil)) : 0
            result.completed = completed - completedAtStart
        }
        if drainTimedOut { result.recordAbandoned(active, after: DirectBench.drainSeconds) }
        return result
    }
}
