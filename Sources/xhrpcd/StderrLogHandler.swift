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
            for (k, v) in all.sorted(by: { $0.key < $1.key }) { o[k] = .string("\(v)") }
            line = JSON.encodeString(.object(o))
        }
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
