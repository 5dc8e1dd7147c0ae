#if canImport(Glibc)
import Glibc
#endif
import CCurl

/// Why a transfer failed: libcurl's `CURLcode` and a sentence a person can act on.
///
/// The text is the transfer's `CURLOPT_ERRORBUFFER` when libcurl wrote one (it names
/// host, port and the system error: "Failed to connect to 127.0.0.1 port 1 after 0 ms:
/// Connection refused"), else `curl_easy_strerror`. TLS failures always begin with
/// `SSL` (api/openrpc.json: `getStatusText` promises it), prefixed with `SSL: ` when
/// libcurl's own words do not. That includes failures libcurl files under a generic
/// code: a TLS 1.3 alert read after the handshake (the server refusing a missing
/// client certificate) is `CURLE_RECV_ERROR` with "OpenSSL SSL_read: …". A proxy's
/// refusal of a CONNECT tunnel says which status the proxy answered and what it means.
public struct TransferFailure: Error, Sendable, CustomStringConvertible {
    /// The `CURLcode` (`CURLE_OPERATION_TIMEDOUT` = 28, …), stable across versions.
    public var code: Int32
    public var text: String

    /// A failure with a `CURLcode` and the sentence to show.
    public init(code: Int32, text: String) {
        self.code = code
        self.text = text
    }

    public var description: String { "\(text) (curl error \(code))" }

    /// The code of a transfer the egress policy stopped: not a `CURLcode` (those are
    /// never negative), since libcurl did not fail; the engine refused to go on.
    public static let egressDeniedCode: Int32 = -1

    /// The prefix of every denial's text, which clients match (docs/security/egress.md).
    public static let egressDeniedPrefix = "Denied by egress policy: "

    /// The prefix of the failure of a response whose framing is invalid (RFC 9112 §6.3:
    /// Content-Length values that differ, or one that is not a number).
    public static let invalidFramingPrefix = "Invalid response framing: "

    /// Whether the egress policy stopped the transfer (at start, at a redirect hop, or
    /// at every address it tried to connect to).
    public var isEgressDenial: Bool { code == TransferFailure.egressDeniedCode }

    /// The failure of a transfer the egress policy stopped; `reason` is the policy's
    /// sentence naming what was denied and which rule or range decided.
    public static func egressDenied(_ reason: String) -> TransferFailure {
        TransferFailure(code: egressDeniedCode, text: egressDeniedPrefix + reason)
    }

    /// Builds the failure for a finished transfer from its code, error buffer and the
    /// system error of its last socket call (`CURLINFO_OS_ERRNO`, 0 when none).
    /// `overTLS` says the transfer's (last) URL was https, so that a send or receive
    /// failure raised by the TLS library is recognised as one.
    init(curlCode: CURLcode, errorBuffer: UnsafePointer<CChar>?, osErrno: Int32 = 0, overTLS: Bool = false) {
        var text = ""
        if let errorBuffer, errorBuffer.pointee != 0 {
            text = String(cString: errorBuffer)
            while let last = text.last, last == "\n" || last == " " { text.removeLast() }
        }
        if text.isEmpty { text = String(cString: curl_easy_strerror(curlCode)) }
        // libcurl 7.88 ends a failed connect with its generic "Couldn't connect to
        // server" and drops the reason it knows; later versions put the reason there.
        // Do the same: "… after 0 ms: Connection refused" says what to fix.
        let generic = ": Couldn't connect to server"
        if curlCode == CURLE_COULDNT_CONNECT, osErrno > 0, text.hasSuffix(generic) {
            text = text.dropLast(generic.count) + ": " + String(cString: strerror(osErrno))
        }
        let tlsLayer = TransferFailure.isTLS(curlCode)
            || (overTLS && (curlCode == CURLE_RECV_ERROR || curlCode == CURLE_SEND_ERROR)
                && text.hasPrefix(TransferFailure.tlsLibraryPrefix))
        if tlsLayer, !text.hasPrefix("SSL") { text = "SSL: " + text }
        // libcurl refuses a Content-Length that is negative or not a number itself, as
        // it reads the line, before the engine sees the head (`ResponseHead.framing`
        // catches the rest): the same failure, said the same way.
        if curlCode == CURLE_WEIRD_SERVER_REPLY, text.hasPrefix("Invalid Content-Length") {
            text = TransferFailure.invalidFramingPrefix + "Content-Length is not a number (\(text))"
        }
        if curlCode == CURLE_RECV_ERROR, let status = TransferFailure.refusedTunnelStatus(text) {
            let phrase = HTTPStatus.phrase(for: status)
            text += (phrase.isEmpty ? "" : " (\(phrase))") + ": the proxy refused to open a tunnel to the server"
        }
        self.init(code: Int32(curlCode.rawValue), text: text)
    }

    /// How libcurl's OpenSSL backend begins the errors of `SSL_read` and `SSL_write`
    /// ("OpenSSL SSL_read: …"); the engine is built against OpenSSL only.
    static let tlsLibraryPrefix = "OpenSSL "

    /// The status of a refused CONNECT in libcurl's "CONNECT tunnel failed, response
    /// 407", or nil when the text is something else.
    static func refusedTunnelStatus(_ text: String) -> Int? {
        let lead = "CONNECT tunnel failed, response "
        guard text.hasPrefix(lead) else { return nil }
        return Int(text.dropFirst(lead.count).prefix { $0.isNumber })
    }

    /// The codes that mean the TLS layer failed: handshake, verification, certificates,
    /// pinning, engines.
    static func isTLS(_ code: CURLcode) -> Bool {
        switch code {
        case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED,
             CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_PEER_FAILED_VERIFICATION,
             CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED, CURLE_SSL_CACERT_BADFILE,
             CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR,
             CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT:
            return true
        default:
            return false
        }
    }
}
