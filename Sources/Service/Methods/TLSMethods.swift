import Foundation
import HTTPEngine
import JSON
import JSONRPC

/// The TLS pre-send options of the request object (api/openrpc.json;
/// docs/guide/tls-proxies-and-auth.md): each may be called in UNSENT and OPENED, and holds until `close`
/// switches the verifications back on or the request is released.
extension Server {
    func registerTLSMethods() {
        onRequest("disablePeerVerification") { r, _ in
            try r.checkOptionsAllowed("disablePeerVerification")
            // Switching off authenticity verification implies the host check (api/openrpc.json).
            r.verifyPeer = false
            r.verifyHost = false
            return true
        }

        onRequest("disableHostVerification") { r, _ in
            try r.checkOptionsAllowed("disableHostVerification")
            r.verifyHost = false
            return true
        }

        onRequest("setClientCertificate", params: ["cert", "key", "password?"]) { [unowned self] r, call in
            try r.checkOptionsAllowed("setClientCertificate")
            r.clientCertificate = try clientCertificate(call.params)
            return true
        }

        onRequest("setPinnedPublicKey", params: ["sha256"]) { r, call in
            let pins = try call.params.string("sha256")
            try PublicKeyPins.check(pins)
            try r.checkOptionsAllowed("setPinnedPublicKey")
            r.pinnedPublicKey = pins
            return true
        }
    }

    /// The certificate of `setClientCertificate`'s parameters (`cert`, `key`,
    /// `password?`), and of `fetch`'s `clientCertificate`.
    func clientCertificate(_ p: Params) throws(RPCError) -> ClientCertificate {
        let cert = try p.string("cert")
        let key = try p.string("key")
        let password = try p.optionalString("password")
        // A client names files the server opens: only below the certificate root,
        // so that it cannot make the server read (or probe) anything else.
        guard let root = config.certRoot else {
            throw ServiceError.needsConfiguration("setClientCertificate needs the server to be started with --cert-root")
        }
        return ClientCertificate(
            certPath: try ConfinedPath.resolve(cert, root: root, rootName: "certificate root"),
            keyPath: try ConfinedPath.resolve(key, root: root, rootName: "certificate root"),
            keyPassword: password)
    }
}

/// The pin syntax `setPinnedPublicKey` accepts: `sha256//` and the base64 of a 32-byte
/// SHA-256 of the public key (SubjectPublicKeyInfo), several joined with `;`. libcurl
/// would also take a file path in the same option; refusing everything else keeps a
/// client from naming server files through it.
enum PublicKeyPins {
    static let prefix = "sha256//"

    static func check(_ pins: String) throws(RPCError) {
        let parts = pins.split(separator: ";", omittingEmptySubsequences: false)
        guard !parts.isEmpty, parts.count <= 64 else {
            throw .invalidParams("'sha256' must hold 1 to 64 pins sha256//BASE64 joined with ';'")
        }
        for part in parts {
            guard part.hasPrefix(prefix), let digest = Data(base64Encoded: String(part.dropFirst(prefix.count))),
                  digest.count == 32
            else {
                throw .invalidParams("'sha256' must be pins of the form sha256//BASE64 (the base64 of a 32-byte SHA-256 of the public key), joined with ';'; file paths are not accepted")
            }
        }
    }
}
