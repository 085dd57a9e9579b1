//! The live view as a terminal table (ratatui over crossterm), redrawn
//! every second; scenario keys, `q` and Ctrl-C.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use crate::metrics::{human_bytes, human_rate};
use crate::scenario::Step;
use crate::session::Demo;
use crate::view;

/// Runs the view until `q`, Ctrl-C or the demo stops (restores the
/// terminal on every way out, panics included).
pub fn run(demo: &Demo, steps: &std::sync::mpsc::Sender<Step>) -> anyhow::Result<()> {
    let mut terminal = ratatui::try_init()?;
    let result = (|| -> anyhow::Result<()> {
        let mut next_draw = Instant::now();
        while !demo.stop.load(Ordering::SeqCst) {
            if Instant::now() >= next_draw {
                terminal.draw(|f| draw(f, demo))?;
                next_draw = Instant::now() + Duration::from_secs(1);
            }
            if !event::poll(Duration::from_millis(100))? {
                continue;
            }
            let Event::Key(key) = event::read()? else {
                continue;
            };
            if key.kind != KeyEventKind::Press {
                continue;
            }
            match key.code {
                KeyCode::Char('q') | KeyCode::Esc => break,
                KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => break,
                KeyCode::Char(c) => {
                    match Step::from_key(c) {
                        Some(step) => {
                            let _ = steps.send(step);
                        }
                        None => demo.say(view::unknown_key(c)),
                    }
                    next_draw = Instant::now();
                }
                _ => {}
            }
        }
        Ok(())
    })();
    ratatui::restore();
    result
}

fn draw(f: &mut Frame, demo: &Demo) {
    let o = demo.observed();
    let (rows, health) = match o.latest() {
        Some(now) => (
            crate::metrics::rows(now, o.rate_base()),
            Some(crate::metrics::health(now)),
        ),
        None => (Vec::new(), None),
    };
    let health_text = health.as_ref().map_or_else(
        || "waiting for the agent's first /metrics".to_owned(),
        |h| view::health_line(h, o.up, demo.agent_pid()),
    );
    drop(o);
    let events = demo.events();
    let table_height = u16::try_from(rows.len() + 3).unwrap_or(u16::MAX);
    let [head, table_area, leak, flows, keys, log] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Max(table_height.max(4)),
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(2),
        Constraint::Min(3),
    ])
    .areas(f.area());
    let bold = Style::default().add_modifier(Modifier::BOLD);
    f.render_widget(
        Paragraph::new(vec![
            Line::styled(
                format!(
                    "lachesis demo · {:.0} s · q quit",
                    demo.uptime().as_secs_f64()
                ),
                bold,
            ),
            Line::from(format!(
                "metrics http://{}/metrics · debug http://{}/debug/ui/",
                demo.fixed.urls.metrics, demo.fixed.urls.debug
            )),
            Line::from(health_text),
        ]),
        head,
    );
    let body: Vec<Row> = rows
        .iter()
        .map(|r| {
            Row::new(vec![
                r.tenant.clone(),
                r.zone.clone(),
                human_bytes(crate::metrics::approx(r.tx)),
                human_rate(r.tx_rate),
                human_bytes(crate::metrics::approx(r.rx)),
                human_rate(r.rx_rate),
            ])
        })
        .collect();
    // 78 columns with the borders: an 80-column terminal shows it whole.
    let widths = [
        Constraint::Length(9),
        Constraint::Length(20),
        Constraint::Length(10),
        Constraint::Length(12),
        Constraint::Length(10),
        Constraint::Length(12),
    ];
    f.render_widget(
        Table::new(body, widths)
            .header(Row::new(vec!["TENANT", "ZONE", "TX", "TX RATE", "RX", "RX RATE"]).style(bold))
            .block(
                Block::bordered().title(" bytes per tenant × zone (from the agent's /metrics) "),
            ),
        table_area,
    );
    if let Some(h) = &health {
        f.render_widget(Paragraph::new(view::leak_line(h)), leak);
    }
    f.render_widget(Paragraph::new(view::flows_line(demo)), flows);
    f.render_widget(
        Paragraph::new(format!("keys: {}  q quit", view::keys_line(&demo.done())))
            .wrap(Wrap { trim: true }),
        keys,
    );
    let first = view::newest_that_fit(
        &events,
        usize::from(log.width.saturating_sub(2)),
        usize::from(log.height.saturating_sub(2)),
    );
    let tail: Vec<Line> = events[first..]
        .iter()
        .map(|e| Line::from(e.clone()))
        .collect();
    f.render_widget(
        Paragraph::new(tail)
            .wrap(Wrap { trim: false })
            .block(Block::bordered().title(" scenario ")),
        log,
    );
}
