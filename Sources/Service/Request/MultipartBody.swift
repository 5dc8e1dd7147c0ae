import Foundation
import JSON
import JSONRPC

/// One part of a `multipart/form-data` body (RFC 7578), as `addMultipartPart` and
/// `fetch {multipart}` take it: `{name, value}` (a text field) or `{name, filename?,
/// contentType?, dataBase64 | path}` (a file). `path` names a file below
/// `--upload-root`, checked when the part is added (`ConfinedPath.resolveRelative`:
/// an escaping path is refused with `path_not_allowed` before anything is read) and
/// again when the body is built, which is when the file is read.
struct MultipartPart {
    enum Content {
        case text(String)
        case bytes([UInt8])
        /// A file below `root`, by the path the client gave (resolved again when read).
        case file(path: String, root: String)
    }

    var name: String
    var filename: String?
    var contentType: String?
    var content: Content

    /// Reads a part from its JSON form. `uploadRoot` is the server's `--upload-root`
    /// (nil: file parts by `path` are refused).
    static func parse(_ value: JSONValue, uploadRoot: String?) throws(RPCError) -> MultipartPart {
        guard let o = value.objectValue else {
            throw .invalidParams("a multipart part must be an object {name, value} or {name, filename?, contentType?, dataBase64 | path}")
        }
        let p = Params(o)
        for key in o.keys where !["name", "value", "filename", "contentType", "dataBase64", "path", "request"].contains(key) {
            throw .invalidParams("a multipart part has no member '\(key)' (name, value, filename, contentType, dataBase64, path)")
        }
        let name = try p.string("name")
        let filename = try p.optionalString("filename")
        let contentType = try p.optionalString("contentType")
        if let contentType {
            guard !contentType.isEmpty, HTTPSyntax.isFieldValue(contentType) else {
                throw .invalidParams("a part's 'contentType' must be a non-empty header value without CR, LF or NUL")
            }
        }
        let sources = ["value", "dataBase64", "path"].filter { p.has($0) }
        guard sources.count == 1 else {
            throw .invalidParams("a multipart part needs exactly one of 'value', 'dataBase64' or 'path'")
        }
        let content: Content
        switch sources[0] {
        case "value":
            content = .text(try p.string("value"))
        case "dataBase64":
            content = .bytes(try Base64Param.decode(try p.string("dataBase64"), name: "dataBase64"))
        default:
            guard let uploadRoot else {
                throw ServiceError.needsConfiguration("a multipart part with 'path' needs the server to be started with --upload-root")
            }
            let path = try p.string("path")
            _ = try ConfinedPath.resolveRelative(path, root: uploadRoot, rootName: "upload root")
            content = .file(path: path, root: uploadRoot)
        }
        var part = MultipartPart(name: name, filename: filename, contentType: contentType, content: content)
        // A file sent from disk is named by its last path component unless told.
        if case .file(let path, _) = content, filename == nil {
            part.filename = path.split(separator: "/").last.map(String.init)
        }
        return part
    }
}

/// The `multipart/form-data` encoder (RFC 7578, as the WHATWG HTML standard's
/// "multipart/form-data encoding algorithm" writes it): each part is
/// `--BOUNDARY CRLF`, `Content-Disposition: form-data; name="…"[; filename="…"]`,
/// a `Content-Type` line for file parts (the part's `contentType`, else
/// `application/octet-stream`) and for text fields only when one is given (RFC 7578
/// §4.4: a field without one is `text/plain`, which is what browsers send), a blank
/// line, the data and CRLF; then `--BOUNDARY--` CRLF. In `name` and `filename` a `"`
/// is written `%22`, CR `%0D` and LF `%0A` (RFC 7578 §4.2 defers to WHATWG here),
/// everything else as its UTF-8.
///
/// File parts are read whole into memory when the request is sent, at most
/// `maxFileBytes` in all: the body then has a known length, and the boundary is
/// checked against every byte it separates. (Streaming the files from disk would lift
/// the bound; the engine's `UploadSource` would have to read across segments.)
enum MultipartEncoding {
    /// The most bytes a request's file parts may hold together.
    static let maxFileBytes = 64 << 20

    static func encode(_ parts: [MultipartPart]) throws(RPCError) -> (bytes: [UInt8], boundary: String) {
        var payloads: [[UInt8]] = []
        var fileBytes = 0
        for part in parts {
            switch part.content {
            case .text(let s): payloads.append(Array(s.utf8))
            case .bytes(let b): payloads.append(b)
            case .file(let path, let root):
                let data = try read(path, root: root, budget: maxFileBytes - fileBytes)
                fileBytes += data.count
                payloads.append(data)
            }
        }
        // 128 random bits: a collision is a curiosity, but one is still never sent.
        var boundary = ""
        for _ in 0..<8 {
            boundary = "xhrpc-" + (0..<4).map { _ in String(format: "%08x", UInt32.random(in: .min ... .max)) }.joined()
            let needle = Array(boundary.utf8)
            let names = parts.flatMap { [$0.name, $0.filename ?? "", $0.contentType ?? ""] }
            if !payloads.contains(where: { contains($0, needle) }) && !names.contains(where: { $0.contains(boundary) }) {
                break
            }
            boundary = ""
        }
        guard !boundary.isEmpty else { throw .internalError("no multipart boundary absent from the data was found") }

        var out: [UInt8] = []
        out.reserveCapacity(payloads.reduce(0) { $0 + $1.count } + parts.count * 160)
        for (part, payload) in zip(parts, payloads) {
            var head = "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(escape(part.name))\""
            if let filename = part.filename { head += "; filename=\"\(escape(filename))\"" }
            head += "\r\n"
            let isText = if case .text = part.content { true } else { false }
            if let type = part.contentType ?? (isText ? nil : "application/octet-stream") {
                head += "Content-Type: \(type)\r\n"
            }
            head += "\r\n"
            out += Array(head.utf8)
            out += payload
            out += Array("\r\n".utf8)
        }
        out += Array("--\(boundary)--\r\n".utf8)
        return (out, boundary)
    }

    /// A name or file name inside a quoted Content-Disposition parameter.
    static func escape(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "%22"
            case "\r": out += "%0D"
            case "\n": out += "%0A"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }

    /// The file's bytes, confined again (a link may have changed since the part was
    /// added) and opened without following a final symbolic link; more than `budget`
    /// bytes is `limit_exceeded`.
    private static func read(_ path: String, root: String, budget: Int) throws(RPCError) -> [UInt8] {
        let real = try ConfinedPath.resolveRelative(path, root: root, rootName: "upload root")
        let fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw ServiceError.fileError("Cannot open '\(path)' below the upload root", path: path) }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            throw ServiceError.fileError("'\(path)' is not a regular file", path: path)
        }
        guard Int(st.st_size) <= budget else {
            throw ServiceError.limitExceeded("multipartFileBytes", max: maxFileBytes,
                                             "Multipart file parts may hold \(maxFileBytes) bytes in all; '\(path)' goes beyond")
        }
        var data = [UInt8](repeating: 0, count: Int(st.st_size))
        var got = 0
        while got < data.count {
            let n = data.withUnsafeMutableBytes { b in pread(fd, b.baseAddress! + got, b.count - got, off_t(got)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw ServiceError.fileError("Cannot read '\(path)' (it shrank or failed)", path: path) }
            got += n
        }
        return data
    }

    private static func contains(_ hay: [UInt8], _ needle: [UInt8]) -> Bool {
        guard let first = needle.first, hay.count >= needle.count else { return false }
        var i = 0
        let last = hay.count - needle.count
        while i <= last {
            if hay[i] == first && hay[i..<(i + needle.count)].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }
}
