// The npm package libretranslate (installed by make test into build/npm; NODE_PATH points
// there), used as its README shows, against a running attend serve. Usage:
//   NODE_PATH=build/npm/node_modules node tests/libre_client.js http://127.0.0.1:PORT
// Prints one JSON object: a de->en translation, one with the source left to the server's
// detection (the client's default "auto"), and what the client made of GET /languages (it
// has no call of its own for the list: it reads /languages before each translation and
// refuses a code the server does not list).
//   ... libre_client.js URL --list TARGET TEXT...
// Prints the translatedText of one request whose query is the list of TEXTs, the source left
// to the server's detection (the client passes a list through as it is).
const { translate } = require('libretranslate');

async function main() {
  const apiurl = process.argv[2];
  if (process.argv[3] === '--list') {
    const texts = process.argv.slice(5);
    console.log(JSON.stringify(await translate({ query: texts, target: process.argv[4], apiurl: apiurl })));
    return;
  }
  const out = {};
  out.translated = await translate({
    query: 'Wo ist der Bahnhof?',
    source: 'de',
    target: 'en',
    format: 'text',
    apiurl: apiurl,
  });
  out.detected = await translate({ query: 'Ich habe Hunger.', target: 'en', apiurl: apiurl });
  try {
    await translate({ query: 'Hallo', source: 'de', target: 'fr', apiurl: apiurl });
    out.unlisted = 'accepted';
  } catch (err) {
    out.unlisted = String(err.message);
  }
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error('libre_client: ' + (err && err.stack ? err.stack : err));
  process.exit(1);
});
