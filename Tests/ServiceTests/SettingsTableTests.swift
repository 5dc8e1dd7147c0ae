import Foundation
import JSON
import Testing
import TestSupport
@testable import Service

/// The settings table (`Settings`): every row typed and named once, the defaults that
/// `ServerConfig` reads are the table's, a config key of the wrong type is refused with
/// the key, its type and the value named, and docs/reference/settings.md is what the
/// table writes. test_daemon.py checks the same against the binary (its options, a
/// wrong-typed key refusing the start).
@Suite struct SettingsTableTests {
    @Test func everyRowHasAFlagOrAKeyAndNoneIsNamedTwice() {
        for d in Settings.all { #expect(d.flag != nil || d.key != nil, "\(d.summary)") }
        let flags = Settings.all.compactMap(\.flag)
        let keys = Settings.all.compactMap(\.key)
        #expect(Set(flags).count == flags.count)
        #expect(Set(keys).count == keys.count)
        #expect(Settings.keyTypes.count == keys.count)
        // The file's keys before the table were all kept (new ones may join them).
        #expect(Set(keys).isSuperset(of: ["listen", "logLevel", "logFormat", "maxMessageBytes", "maxConnections", "maxBufferBytes",
                              "maxRedirects", "uploadRoot", "downloadRoot", "socketMode", "caFile", "tlsMin", "certRoot",
                              "egressProxy", "stateDir", "allow", "deny", "principals", "limits", "maxResponseBytes",
                              "insecureTCP", "allowNegotiate", "authTimeout", "requestTTL", "detachTTL", "drainSeconds",
                              "redactQuery", "tlsCert", "tlsKey", "tlsHandshakeTimeout", "tcpKeepalive", "httpListen", "wsOrigins"]))
    }

    @Test func everyDefaultIsInsideItsBoundsAndSaysSoInTheHelp() {
        for d in Settings.all {
            #expect(d.defaultInBounds, "\(d.key ?? d.flag ?? "")")
            if let key = d.key { #expect(d.help.contains("config key \"\(key)\", \(d.type.rawValue)"), "\(key)") }
            if let text = d.defaultText { #expect(d.help.contains("default \(text)"), "\(d.key ?? "")") }
            #expect(!d.summary.hasSuffix("."), "\(d.key ?? d.flag ?? ""): help adds the full stop")
        }
    }

    @Test func serverConfigsDefaultsAreTheTables() {
        let c = ServerConfig()
        #expect(c.connection.maxMessageBytes == Settings.maxMessageBytes.fallback)
        #expect(c.maxConnections == Settings.maxConnections.fallback)
        #expect(c.maxBufferBytes == Settings.maxBufferBytes.fallback)
        #expect(c.maxRedirects == Settings.maxRedirects.fallback)
        #expect(c.maxResponseBytes == nil && Settings.maxResponseBytes.defaultValue == nil)
        #expect(c.authTimeout == Settings.authTimeout.fallback)
        #expect(c.tlsHandshakeTimeout == UInt64(Settings.tlsHandshakeTimeout.fallback))
        #expect(c.tcpKeepalive == UInt32(Settings.tcpKeepalive.fallback))
        #expect(c.requestTTL == Settings.requestTTL.fallback)
        #expect(c.detachTTL == Settings.detachTTL.fallback)
        #expect(c.drainSeconds == Settings.drainSeconds.fallback)
        #expect(c.insecureTCP == Settings.insecureTCP.fallback)
        #expect(c.allowNegotiate == Settings.allowNegotiate.fallback)
        #expect(c.unixSocketMode == 0o600 && Settings.socketMode.fallback == "0600")
        #expect(c.engine.tlsMin.rawValue == Settings.tlsMin.fallback)
        // The values themselves, as the README and --help gave them before the table.
        #expect(Settings.maxMessageBytes.fallback == 16 << 20)
        #expect(Settings.maxBufferBytes.fallback == 8 << 20)
        #expect(Settings.tcpKeepalive.fallback == 60)
        #expect(Settings.limits.descriptor.defaultColumn
            == "per principal: requests 1000, transfers 64, bufferedBytes 268435456 (256 MiB), connections 128, sockets 64")
    }

    /// For each key, a value of every other JSON type is refused, with the key, the type
    /// it needs and the value given in the message.
    @Test func aKeyOfTheWrongTypeIsRefusedWithTheKeyNamed() {
        let samples: [JSONValue] = [.string("1000"), .int(7), .double(1.5), .bool(true), .array([.string("a")]),
                                    .object(["a": .int(1)]), .array([.object(["name": .string("x")])]), .null]
        for (key, type) in Settings.keyTypes {
            for value in samples where !type.admits(value) {
                // An array of strings with something else in it names that element.
                let odd = type == .strings ? value.arrayValue?.first { $0.stringValue == nil } : nil
                let expected = odd.map { "the config key '\(key)' must hold only strings; found \(JSON.encodeString($0))" }
                    ?? "the config key '\(key)' must be \(type.rawValue); found \(JSON.encodeString(value))"
                #expect {
                    try Settings.check([key: value], in: "the config file f.json")
                } throws: { error in
                    (error as? SettingError)?.description == expected
                }
            }
        }
        #expect(throws: SettingError.self) { try Settings.check(["maxMessageBytes": .string("1000")], in: "f") }
        #expect((try? Settings.check(["maxMessageBytes": .double(1000)], in: "f")) != nil, "1000.0 is an integer")
        #expect(throws: SettingError.self) { try Settings.check(["maxMessageBytes": .double(1000.5)], in: "f") }
        #expect(throws: SettingError.self) { try Settings.check(["drainSeconds": .string("1")], in: "f") }
        #expect((try? Settings.check(["drainSeconds": .int(1), "authTimeout": .double(0.5)], in: "f")) != nil)
    }

    @Test func theWrongTypeMessageIsExact() {
        #expect {
            try Settings.check(["maxMessageBytes": .string("1000")], in: "the config file f.json")
        } throws: { error in
            (error as? SettingError)?.description == "the config key 'maxMessageBytes' must be an integer; found \"1000\""
        }
        #expect {
            try Settings.check(["maxMesageBytes": .int(1)], in: "the config file f.json")
        } throws: { error in
            (error as? SettingError)?.description.hasPrefix("the config file f.json has an unknown key 'maxMesageBytes'; known: allow, allowNegotiate,") == true
        }
    }

    @Test func aValueOutOfBoundsNamesWhereItCameFrom() throws {
        #expect {
            _ = try Settings.maxMessageBytes.resolve(flag: nil, file: ["maxMessageBytes": .int(0)])
        } throws: { error in
            (error as? SettingError)?.description == "the config key 'maxMessageBytes' must be a positive number; found 0"
        }
        #expect {
            _ = try Settings.drainSeconds.resolve(flag: -1, file: [:])
        } throws: { error in
            (error as? SettingError)?.description == "--drain-seconds must be a non-negative number of seconds, at most a year"
        }
        #expect(try Settings.maxRedirects.resolve(flag: nil, file: ["maxRedirects": .int(0)]) == 0)
        #expect(try Settings.maxRedirects.resolve(flag: 3, file: ["maxRedirects": .int(0)]) == 3, "the flag wins")
        #expect(try Settings.maxRedirects.resolve(flag: nil, file: [:]) == nil)
    }

    @Test func theCommittedReferencePageIsCurrent() throws {
        let path = Repository.root + "/docs/reference/settings.md"
        let committed = try String(contentsOfFile: path, encoding: .utf8)
        #expect(committed == SettingsReference.page(), "run make settings-reference and commit docs/reference/settings.md")
        for d in Settings.all {
            if let key = d.key { #expect(committed.contains("`\(key)`")) }
            if let flag = d.flag { #expect(committed.contains("`--\(flag)")) }
        }
    }
}
