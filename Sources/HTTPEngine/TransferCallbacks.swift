import CCurl

/// The C functions libcurl calls for one transfer. Each receives the `Transfer` as its
/// user pointer (`Unmanaged.passUnretained`, set in `TransferEngine.configure`): the
/// engine's `active` table holds the strong reference for as long as the easy handle is
/// in the multi, and the handle leaves the multi before that reference is dropped, so
/// the pointer is valid whenever libcurl calls. Non-capturing, as C function pointers
/// must be.
///
/// That same guarantee lets the hot three (write, header, progress — a dozen calls or
/// more per request) borrow the transfer (`_withUnsafeGuaranteedRef`) instead of
/// retaining and releasing it around every call.
enum TransferCallbacks {
    static let write: curl_write_callback = { data, size, count, userp in
        guard let userp else { return 0 }
        return Unmanaged<Transfer>.fromOpaque(userp)._withUnsafeGuaranteedRef {
            $0.bodyArrived(UnsafeRawBufferPointer(start: data, count: size * count))
        }
    }

    static let header: curl_write_callback = { data, size, count, userp in
        guard let userp else { return 0 }
        return Unmanaged<Transfer>.fromOpaque(userp)._withUnsafeGuaranteedRef {
            $0.headerLineArrived(UnsafeRawBufferPointer(start: data, count: size * count))
        }
    }

    static let progress: curl_xferinfo_callback = { userp, dlTotal, dlNow, ulTotal, ulNow in
        guard let userp else { return 1 }
        let p = TransferProgress(uploaded: Int64(ulNow), uploadTotal: Int64(ulTotal),
                                 downloaded: Int64(dlNow), downloadTotal: Int64(dlTotal))
        return Unmanaged<Transfer>.fromOpaque(userp)._withUnsafeGuaranteedRef { $0.progressArrived(p) }
    }

    static let read: curl_read_callback = { buffer, size, count, userp in
        guard let userp, let buffer else { return Curl.readAbort }
        let t = Unmanaged<Transfer>.fromOpaque(userp).takeUnretainedValue()
        guard t.state == .running, let upload = t.upload else { return Curl.readAbort }
        if t.pauseReasons.contains(.requested) {
            t.pausedInCurl = true
            return Curl.readPause
        }
        return upload.read(into: UnsafeMutableRawPointer(buffer), capacity: size * count)
    }

    static let seek: curl_seek_callback = { userp, offset, origin in
        guard let userp else { return Curl.seekFail }
        let t = Unmanaged<Transfer>.fromOpaque(userp).takeUnretainedValue()
        // libcurl only ever seeks from the start (SEEK_SET) to rewind.
        guard origin == SEEK_SET, let upload = t.upload, upload.seek(to: Int64(offset)) else { return Curl.seekFail }
        return Curl.seekOK
    }
}
