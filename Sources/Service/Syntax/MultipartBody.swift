import Foundation
import HTTPEngine
import JSON
import JSONRPC

/// One part of a `multipart/form-data` body (RFC 7578), as `addMultipartPart` and
/// `fetch {multipart}` take it: `{name, value}` (a text field) or `{name, filename?,
/// contentType?, dataBase64 | path}` (a file). `path` names a file below the
/// principal's upload root by `ConfinedPath`'s rule, checked when the part is added (a
/// refused path is `path_not_allowed`, and nothing is read) and opened by the same rule
/// when the body is built at `send`; the engine then streams that descriptor.
struct MultipartPart {
    enum Content {
        case text(String)
        case bytes([UInt8])
        /// A file below `root`, by the path the client gave (opened at `send`).
        case file(path: String, root: FileRoot)
    }

    var name: String
    var filename: String?
    var contentType: String?
    var content: Content

    /// What the part holds in memory, for the principal's budget (`RequestBody.held`):
    /// its strings and bytes (a file part, its path only: the file is read at `send`)
    /// and one entry's overhead.
    var heldBytes: Int {
        let strings = name.utf8.count + (filename?.utf8.count ?? 0) + (contentType?.utf8.count ?? 0)
        switch content {
        case .text(let text): return HeldBytes.perEntry + strings + text.utf8.count
        case .bytes(let bytes): return HeldBytes.perEntry + strings + bytes.count
        case .file(let path, let root): return HeldBytes.perEntry + strings + path.utf8.count + root.directory.utf8.count
        }
    }

    /// Reads a part from its JSON form. `uploadRoot` is the principal's (nil: file parts
    /// by `path` are refused).
    static func parse(_ value: JSONValue, uploadRoot: FileRoot?) throws(RPCError) -> MultipartPart {
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
            _ = try ConfinedPath.openForReading(path, in: uploadRoot)  // checked now, closed at once
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
/// File parts are not loaded: the body is a `TransferBody.segments` whose files the
/// engine opens when the transfer starts and reads in the pieces libcurl asks for, so a
/// part of any size (beyond 4 GiB too) costs no memory. The boundary is 128 random bits,
/// checked against every byte held in memory (text fields, `dataBase64`, names);
/// file contents are not scanned (that would read them twice), and cannot contain a
/// boundary chosen after they were written except by a 2^-128 chance.
enum MultipartEncoding {
    static func encode(_ parts: [MultipartPart]) throws(RPCError) -> (body: TransferBody, boundary: String) {
        // Opened now by the rule: the folder may have changed since the part was added.
        var files: [UploadFile?] = []
        for part in parts {
            if case .file(let path, let root) = part.content {
                files.append(try ConfinedPath.openForReading(path, in: root))
            } else {
                files.append(nil)
            }
        }
        var boundary = ""
        for _ in 0..<8 {
            boundary = "xhrpc-" + (0..<4).map { _ in String(format: "%08x", UInt32.random(in: .min ... .max)) }.joined()
            if !parts.contains(where: { occurs(boundary, in: $0) }) { break }
            boundary = ""
        }
        guard !boundary.isEmpty else { throw .internalError("no multipart boundary absent from the data was found") }

        var segments: [BodySegment] = []
        var pending: [UInt8] = []
        for (part, file) in zip(parts, files) {
            var head = "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(escape(part.name))\""
            if let filename = part.filename { head += "; filename=\"\(escape(filename))\"" }
            head += "\r\n"
            let isText = if case .text = part.content { true } else { false }
            if let type = part.contentType ?? (isText ? nil : "application/octet-stream") {
                head += "Content-Type: \(type)\r\n"
            }
            head += "\r\n"
            pending += Array(head.utf8)
            switch part.content {
            case .text(let s): pending += Array(s.utf8)
            case .bytes(let b): pending += b
            case .file:
                segments.append(.bytes(pending))
                pending = []
                if let file { segments.append(.file(file)) }
            }
            pending += Array("\r\n".utf8)
        }
        pending += Array("--\(boundary)--\r\n".utf8)
        segments.append(.bytes(pending))
        return (segments.count == 1 ? .bytes(pending) : .segments(segments), boundary)
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

    /// Whether `boundary` occurs in what the part holds in memory.
    private static func occurs(_ boundary: String, in part: MultipartPart) -> Bool {
        if [part.name, part.filename ?? "", part.contentType ?? ""].contains(where: { $0.contains(boundary) }) { return true }
        switch part.content {
        case .text(let s): return s.contains(boundary)
        case .bytes(let b): return contains(b, Array(boundary.utf8))
        case .file: return false
        }
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
