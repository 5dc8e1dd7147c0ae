import Foundation
import HTTPEngine
import JSONRPC

/// Body parameters, read the same way by every method that takes one.
enum BodyParams {
    /// `body` (text, sent as its UTF-8) or `bodyBase64`, at most one of them; neither is
    /// no body.
    static func body(_ p: Params) throws(RPCError) -> TransferBody {
        switch (try p.optionalString("body"), try p.optionalString("bodyBase64")) {
        case (nil, nil): return .none
        case (let text?, nil): return .bytes(Array(text.utf8))
        case (nil, let b64?): return .bytes(try Base64Param.decode(b64, name: "bodyBase64"))
        default: throw RPCError.invalidParams("give 'body' or 'bodyBase64', not both")
        }
    }
}

/// Base64 parameters: an invalid one is the caller's error, said with its name. Read
/// strictly (`Base64Text.decode`).
enum Base64Param {
    static func decode(_ text: String, name: String) throws(RPCError) -> [UInt8] {
        guard let bytes = Base64Text.decode(text) else {
            throw .invalidParams("'\(name)' is not valid base64 (standard alphabet, padded with '=' to a multiple of 4 characters)")
        }
        return bytes
    }
}

/// `encoding` and `maxBytes` of the reading methods (`getReceiveBuffer`, `socket.read`):
/// base64 and everything unread unless told.
enum ReadParams {
    static func parse(_ p: Params) throws(RPCError) -> (maxBytes: Int, encoding: BodyEncoding) {
        let encoding = try p.optionalWord("encoding", oneOf: ["base64", "utf8"]).flatMap(BodyEncoding.init(rawValue:)) ?? .base64
        let max = try p.optionalInt("maxBytes", in: 0...Int64(Int32.max)).map(Int.init) ?? Int.max
        return (max, encoding)
    }
}
