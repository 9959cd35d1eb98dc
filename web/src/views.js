// Which of the five views (pair, home, new, session, terminal) is shown. Entering a view's
// content is each view's own module (lists.js's showHome, new-session.js,
// session-view.js); this only switches the sections and the header.

import { app, CURRENT_KEY } from './state.js';
import { setRoute } from './route.js';

export function showView(view) {
  // Leaving the terminal view lets its emulator go (the terminal runs on; terminal-view.js).
  if (app.view === 'terminal' && view !== 'terminal') app.terminals?.leave();
  app.view = view;
  const ui = app.ui;
  ui.viewPair.hidden = view !== 'pair';
  ui.viewHome.hidden = view !== 'home';
  ui.viewNew.hidden = view !== 'new';
  ui.viewSession.hidden = view !== 'session';
  if (ui.viewTerminal) ui.viewTerminal.hidden = view !== 'terminal';
  ui.back.hidden = !(view === 'new' || view === 'session' || view === 'terminal' || (view === 'pair' && app.bridges.size > 0));
  document.body.dataset.view = view;
  if (view === 'home') {
    app.current = null;
    try {
      sessionStorage.removeItem(CURRENT_KEY);
    } catch {
      /* storage off */
    }
    setRoute(null, null);
    ui.title.textContent = 'terminull';
  } else if (view === 'new') {
    ui.title.textContent = 'New session';
  }
}
