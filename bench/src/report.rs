//! What a run reports: one row per figure, each beside its floor and its target.

use serde::Serialize;

/// One measured figure.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The hop or component (`adapter → dispatcher`, `relay`, …).
    pub hop: String,
    /// What was measured.
    pub measure: String,
    /// The figure.
    pub value: f64,
    /// Its unit.
    pub unit: String,
    /// The floor it is compared with, measured in the same run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_name: Option<String>,
    /// The floor's figure, in the same unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<f64>,
    /// `value / floor`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// The target for this figure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Whether the target is met.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub met: Option<bool>,
}

impl Row {
    /// A figure with no floor and no target.
    pub fn new(hop: &str, measure: impl Into<String>, value: f64, unit: &str) -> Self {
        Self {
            hop: hop.to_owned(),
            measure: measure.into(),
            value,
            unit: unit.to_owned(),
            floor_name: None,
            floor: None,
            ratio: None,
            target: None,
            met: None,
        }
    }

    /// Beside `floor` (the ratio is `value / floor`).
    pub fn floor(mut self, name: &str, floor: f64) -> Self {
        self.floor_name = Some(name.to_owned());
        self.floor = Some(floor);
        self.ratio = (floor > 0.0).then(|| self.value / floor);
        self
    }

    /// With a target and whether it is met.
    pub fn target(mut self, target: &str, met: bool) -> Self {
        self.target = Some(target.to_owned());
        self.met = Some(met);
        self
    }
}

/// A number as the table shows it: thousands separated, 3 significant digits below 100.
pub fn number(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    if v.abs() >= 100.0 {
        let n = v.round() as i64;
        let digits = n.unsigned_abs().to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        if n < 0 { format!("-{out}") } else { out }
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The rows as a Markdown table (what docs/performance.md shows).
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from("| hop | measure | value | floor (same run) | ratio | target | status |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    for r in rows {
        let floor = match (&r.floor_name, r.floor) {
            (Some(name), Some(f)) => format!("{} {} ({name})", number(f), r.unit),
            _ => String::new(),
        };
        let ratio = r.ratio.map(|x| format!("{x:.2}×")).unwrap_or_default();
        let status = match r.met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "",
        };
        out.push_str(&format!(
            "| {} | {} | {} {} | {} | {} | {} | {} |\n",
            r.hop,
            r.measure,
            number(r.value),
            r.unit,
            floor,
            ratio,
            r.target.as_deref().unwrap_or(""),
            status
        ));
    }
    out
}
