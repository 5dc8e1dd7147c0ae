import Foundation
import HTTPEngine
import JSONRPC

/// The file sink of a `download`: the same request object, with its body going to a
/// `DownloadFile` instead of the receive buffer (`getReceiveBuffer` then reads nothing:
/// `{data: "", bytes: 0}`, `done` once DONE). The hooks below are called from
/// `HTTPRequest+Transfer.swift` at the points where the body and the progress of every
/// request pass.
///
/// The file is put in place when the exchange completes (`placeDownload`), before the
/// request is DONE, so a failed rename fails the request.
///
/// Lifetime of the file's descriptors: opened by `download`, closed at DONE (whatever
/// ended the exchange: completion, failure, `abort`, a stop at shutdown), by `open`
/// (a new exchange), or by `release` (also the connection's close and the TTL).
extension HTTPRequest {
    /// Makes this request's next send a download into `file`: asks for the rest of a
    /// kept part and for the bytes as the server has them (no content decoding).
    func sendsIntoFile(_ file: DownloadFile) throws(RPCError) {
        for (name, value) in file.rangeHeaders { try setRequestHeader(name, value) }
        download = file
    }

    /// The final head arrived: the file decides what its body means.
    func downloadHeadArrived(_ head: ResponseHead) {
        _ = download?.headArrived(status: head.status, headers: head.headers, url: displayURL)
    }

    /// Body bytes of a download (after the `--max-response-bytes` check every body
    /// passes): written to the file (or thrown away for a response that is not the
    /// file's), counted as any body is.
    func downloadReceived(_ t: Transfer, _ file: DownloadFile, _ bytes: UnsafeRawBufferPointer) -> Bool {
        switch file.decision {
        case .fail(let why)?: return fail(t, why)
        case .write?:
            if let why = file.write(bytes) { return fail(t, why) }
        default:
            break
        }
        receivedBytes += bytes.count
        principal.usage.httpBytesReceived += UInt64(bytes.count)
        perform(machine.bodyReceived())
        return true
    }

    /// Why a download whose transfer completed did not get its whole file (a resume at
    /// the wrong offset, a body shorter than announced), or nil.
    var downloadShortfall: String? {
        guard let file = download else { return nil }
        if case .fail(let why)? = file.decision { return why }
        return file.incompleteness
    }

    /// Progress counts the whole file: the bytes kept from an earlier attempt are added
    /// to the received figure and to a known total.
    func downloadAdjusted(_ p: TransferProgress) -> TransferProgress {
        guard let offset = download?.progressOffset, offset > 0 else { return p }
        var q = p
        q.downloaded += offset
        if q.downloadTotal > 0 { q.downloadTotal += offset }
        return q
    }

    /// The exchange completed: a complete file goes into place. Nil, or why it could not
    /// (the request then fails: DONE with status 0 and this text).
    func placeDownload() -> String? { download?.place() }

    /// At DONE: the descriptors close, the files stay as they are.
    func finishDownload() {
        download?.close()
        download = nil
    }

    /// Drops the download without placing its file (open, release).
    func dropDownload() {
        download?.close()
        download = nil
    }
}
