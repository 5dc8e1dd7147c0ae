import Foundation
import JSON
import Logging

/// Log lines on stderr, as text for people or as one JSON object a line for log
/// shippers. Passwords and tokens never reach a log call, so none is filtered here.
struct StderrLogHandler: LogHandler {
    enum Format: String { case text, json }

    let label: String
    let format: Format
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    init(label: String, format: Format) {
        self.label = label
        self.format = format
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let time = Date().formatted(.iso8601.time(includingFractionalSeconds: true).year().month().day().dateSeparator(.dash).dateTimeSeparator(.standard).timeSeparator(.colon))
        var all = metadata
        if let extra = event.metadata { all.merge(extra) { $1 } }
        var line: String
        switch format {
        case .text:
            line = "\(time) \(event.level) \(label):"
            for (k, v) in all.sorted(by: { $0.key < $1.key }) { line += " \(k)=\(v)" }
            line += " \(event.message)"
        case .json:
            var o: JSONObject = ["time": .string(time), "level": .string(event.level.rawValue), "logger": .string(label),
                                 "message": .string("\(event.message)")]
            for (k, v) in all.sorted(by: { $0.key < $1.key }) { o[k] = Self.json(v) }
            line = JSON.encodeString(.object(o))
        }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// A metadata value as JSON: numbers given as numbers stay numbers (the access
    /// log's status, bytes and duration), everything else is its text.
    static func json(_ v: Logger.MetadataValue) -> JSONValue {
        switch v {
        case .string(let s): return .string(s)
        case .stringConvertible(let c):
            if let i = c as? Int { return .int(Int64(i)) }
            if let d = c as? Double { return .double(d) }
            return .string(c.description)
        case .array(let a): return .array(a.map(json))
        case .dictionary(let d): return .object(JSONObject(d.sorted { $0.key < $1.key }.map { ($0.key, json($0.value)) }))
        }
    }
}
