import Foundation

/// docs/reference/settings.md, written from the settings table (`Settings.all`) by
/// `xhrpcd --print-settings-reference` (`make settings-reference`). `make settings-check`
/// fails when the committed page differs from what this writes.
public enum SettingsReference {
    public static func page(_ table: [SettingDescriptor] = Settings.all) -> String {
        var out = """
            # Settings reference

            <!-- Written by `make settings-reference` from the settings table,
                 Sources/Service/Settings/Settings.swift. Do not edit: change the table.
                 `make settings-check` (part of `make test`) fails when this page is not current. -->

            For operators: every flag and config key of `xhrpcd`, with its default and bounds.

            Every setting of `xhrpcd` is a flag, a key of the `--config` JSON file, or both;
            `xhrpcd --help` shows the same text. A flag given on the command line wins over the
            file's key, and a repeatable flag replaces the file's list of the same key.
            `principals` are declared in the file only, so that no token hash sits on a command line.

            The file is checked whole before anything starts: an unknown key, or a key whose value
            is not of the type below (`"maxMessageBytes": "1000"`), stops `xhrpcd` with a message
            naming the key, the type it needs and the value given, and a non-zero exit status. An
            integer may be written `1000` or `1000.0`, not `1000.5`; durations in seconds are
            numbers and may have fractions (`0.5`).

            | flag | config key | type | default |
            |---|---|---|---|

            """
        for d in table {
            let flag = d.flag.map { "`--\($0)\(d.valueName.map { " " + $0.uppercased() } ?? "")`" + (d.repeatable ? " (repeatable)" : "") }
                ?? "(config file only)"
            let key = d.key.map { "`\($0)`" } ?? "(command line only)"
            let type = d.key == nil ? "" : d.type.rawValue
            out += "| \(cell(flag)) | \(key) | \(type) | \(cell(text(d.defaultColumn))) |\n"
        }
        out += "\n## Each setting\n"
        for d in table {
            let title = [d.flag.map { "--\($0)" }, d.key].compactMap { $0 }.joined(separator: " / ")
            out += "\n### `\(title)`\n\n\(text(d.summary)).\n\n"
            if let flag = d.flag {
                out += "- Flag: `--\(flag)\(d.valueName.map { " " + $0.uppercased() } ?? "")`\(d.repeatable ? ", repeatable" : "")\n"
            }
            if let key = d.key { out += "- Config key: `\(key)`, \(d.type.rawValue)\n" }
            out += "- Default: \(text(d.defaultColumn))\n"
            if let bounds = d.bounds { out += "- Must be \(bounds.description)\n" }
            if let see = d.see { out += "- See [\(see.split(separator: "/").last ?? "")](\(see))\n" }
        }
        return out
    }

    /// Text where Markdown would read `<uid>` as an HTML tag, or `*.example.com` as emphasis.
    private static func text(_ s: String) -> String {
        s.replacingOccurrences(of: "<", with: "&lt;").replacingOccurrences(of: ">", with: "&gt;")
            .replacingOccurrences(of: "*", with: "\\*")
    }

    /// A table cell: a `|` would end it.
    private static func cell(_ text: String) -> String {
        text.replacingOccurrences(of: "|", with: "\\|")
    }
}
